#!/usr/bin/env bash
# Keepers through a pooler (issue 26): one store S, PgBouncer in transaction pooling mode in
# front of it, two servers A and B whose cosid.store_dsn points at PgBouncer.  First, before
# PgBouncer runs, a caller's error names what the keeper found (the store's own words) and
# the keeper logs it once; then both servers insert through PgBouncer, the store stops behind
# it (until each keeper saw it) and starts again, and: zero duplicate ids across A and B, every id inside a window the store
# granted to its slot (recorded by a trigger on the store's lease table, in the store's own
# transactions), and each keeper logged the outage once.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
apt_install_missing pgbouncer
base="${1:-/tmp/cosid-e2e}/pgbouncer"
S="$base/store"; A="$base/a"; P="$base/bouncer"
# shellcheck disable=SC2034  # B: read as ${!s}
B="$base/b"
PS=55481; PA=55482; PB=55483; PP=55484
trap 'kill $(jobs -p) 2>/dev/null || true; [ -f "$P/pgbouncer.pid" ] && kill "$(cat "$P/pgbouncer.pid")" 2>/dev/null
      node_stop_all immediate' EXIT

node_up s "$S" "$PS"
qs -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('pb', slot_bits => 5, tolerance => '300 ms')" \
   -c "SELECT cosid_namespace_create('pb' || g, slot_bits => 5, tolerance => '300 ms') FROM generate_series(2, 3) g" \
   -c "CREATE TABLE observed (namespace text, slot int, fence bigint, incarnation uuid, floor bigint, ceiling bigint)" \
   >/dev/null
qs <<'SQL' >/dev/null
CREATE FUNCTION public.observe_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.observed VALUES (NEW.namespace, NEW.slot, NEW.fence, NEW.incarnation, NEW.floor, NEW.ceiling);
    RETURN NULL;
END $$;
CREATE TRIGGER observe_lease AFTER INSERT OR UPDATE ON cosid.lease FOR EACH ROW EXECUTE FUNCTION public.observe_lease();
SQL

rm -rf "$P"; mkdir -p "$P"; chown "$PG_USER" "$P"
cat > "$P/pgbouncer.ini" <<INI
[databases]
postgres = host=$S port=$PS dbname=postgres user=postgres

[pgbouncer]
listen_addr =
listen_port = $PP
unix_socket_dir = $P
auth_type = any
pool_mode = transaction
default_pool_size = 4
max_client_conn = 50
server_login_retry = 1
pidfile = $P/pgbouncer.pid
logfile = $P/pgbouncer.log
INI
chown "$PG_USER" "$P/pgbouncer.ini"

# A and B point at PgBouncer, which is not running yet.
for s in A B; do
    d=${!s}; p=$([ $s = A ] && echo $PA || echo $PB)
    node_up "${s,,}" "$d" "$p" "cosid.store_dsn = 'host=$P port=$PP dbname=postgres'" "cosid.ttl = '2s'" \
        "cosid.namespace = 'pb'"
    node_sql "${s,,}" -c "CREATE EXTENSION cosid" \
        -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), v int)" >/dev/null
done

echo "# the store cannot be reached (nothing listens where cosid.store_dsn points)"
down=$(qa -v VERBOSITY=verbose -c "SET cosid.acquire_timeout = '3s'" -c "SELECT cosid_next()" 2>&1 || true)
grep -E 'ERROR|DETAIL|HINT' <<<"$down" | sed 's/^/#   /'
check "the caller gets ZC006" 1 "$(grep -c 'ERROR:  ZC006' <<<"$down")"
check "the caller's error says what the keeper found: the store's own words" 1 \
    "$(grep -c "DETAIL:  .*lease store.*$P/.s.PGSQL.$PP.*failed" <<<"$down")"
check "the caller's error does not blame CREATE EXTENSION" 0 "$(grep -c 'CREATE EXTENSION cosid ran' <<<"$down")"
unreachable="cosid keeper: cannot reach the lease store"
check_true "A's keeper logged the unreachable store with its words" \
    "$(wait_until 10 bash -c "grep -q '$unreachable.*$P/.s.PGSQL.$PP' '$A/server.log' && echo t")"
check "...once for the outage (not once per attempt)" 1 "$(grep -c "$unreachable" "$A/server.log")"

as_pg pgbouncer -d "$P/pgbouncer.ini"
check_true "PgBouncer accepts connections" "$(wait_until 10 as_pg "$PG_BIN/psql" -X -At -h "$P" -p "$PP" -d postgres -c "SELECT true")"
check "A issues through PgBouncer" "t" "$(qa -c "SET cosid.acquire_timeout = '10s'" -c "SELECT cosid_next() > 0" 2>&1 | tail -1)"
check "B issues through PgBouncer" "t" "$(qb -c "SET cosid.acquire_timeout = '10s'" -c "SELECT cosid_next() > 0" 2>&1 | tail -1)"
check_true "A's keeper logged that the store answers again" \
    "$(grep -q 'cosid keeper: the lease store answers again' "$A/server.log" && echo t)"
check "PgBouncer refused no keeper connection" 0 "$(grep -c 'unsupported startup parameter' "$P/pgbouncer.log" || true)"
check_true "a keeper's transaction ran on the store through PgBouncer (application_name passed on)" \
    "$(qs -c "SELECT count(*) > 0 FROM pg_stat_activity
              WHERE backend_type = 'client backend' AND application_name = 'cosid keeper'")"

# Clients: one psql per statement, each recording ok or the SQLSTATE of its failure.
mkdir -p "$base/clients"; chown "$PG_USER" "$base/clients"; rm -f "$base/stop"
client() {  # client NODE NAME (its psql without ON_ERROR_STOP, as a plain psql runs)
    trap - EXIT; set +e
    while [ ! -e "$base/stop" ]; do
        if out=$(node_sql "$1" -v ON_ERROR_STOP=0 -v VERBOSITY=sqlstate \
              -c "SET cosid.acquire_timeout = '5s'" -c "INSERT INTO t(v) SELECT g FROM generate_series(1, 50) g" 2>&1)
        then echo "$(now_ms) ok"; sleep "$CLIENT_PACE"
        else code=$(sqlstate_of "$out"); echo "$(now_ms) ${code:-conn}"; sleep 0.05
        fi
    done > "$base/clients/$2.log"
}
for c in 1 2; do client a "a$c" & client b "b$c" & done
sleep 3
echo "# the store restarts behind PgBouncer while both servers insert"
# Down until each keeper has seen a renewal fail (a restart between two renewals can go by
# unseen: PgBouncer connects again before the next one), so that each has an outage to log.
f0a=$(qa -c "SELECT renewal_failures FROM cosid_stats()"); f0b=$(qb -c "SELECT renewal_failures FROM cosid_stats()")
node_stop s fast
check_true "A's keeper finds the store down" "$(wait_for 30 "a renewal failure on A" qa -c "SELECT renewal_failures > $f0a FROM cosid_stats()")"
check_true "B's keeper finds the store down" "$(wait_for 30 "a renewal failure on B" qb -c "SELECT renewal_failures > $f0b FROM cosid_stats()")"
node_start s; t_restart=$(now_ms)
for s in A B; do
    q=q${s,,}; r0=$($q -c "SELECT renewals FROM cosid_stats()")
    check_true "$s renews again after the store's restart" \
        "$(wait_for 30 "$s's renewals" $q -c "SELECT renewals >= $r0 + 2 FROM cosid_stats()")"
done
sleep 3
touch "$base/stop"; wait
for s in a b; do
    echo "# $s: $(cat "$base"/clients/$s*.log | awk '$2 == "ok"' | wc -l) statements ok, failures: $(
        cat "$base"/clients/$s*.log | awk '$2 != "ok" {print $2}' | sort | uniq -c | tr '\n' ' ')"
    check_true "$s inserted after the store restarted" "$(cat "$base"/clients/$s*.log |
        awk -v t="$t_restart" '$2 == "ok" && $1 > t {n++} END {print (n > 0) ? "t" : "f"}')"
done
check "no unique violation in any client" 0 "$(cat "$base"/clients/*.log | grep -c ' 23505' || true)"

echo "# one store transaction per keeper pass: A holds leases in pb, pb2 and pb3"
qa -c "SET cosid.acquire_timeout = '10s'" -c "SELECT cosid_next('pb2'), cosid_next('pb3')" >/dev/null
# the three stay leased for the pool's idle timeout (60 s), idle or not
read -r r0 x0 <<<"$(qa -F ' ' -c "SELECT renewals, store_transactions FROM cosid_stats()")"
check_true "A renews its 3 leases a few times" "$(wait_for 30 "A's renewals" qa -c "SELECT renewals >= $r0 + 12 FROM cosid_stats()")"
read -r r1 x1 <<<"$(qa -F ' ' -c "SELECT renewals, store_transactions FROM cosid_stats()")"
echo "# A: $((r1 - r0)) renewals in $((x1 - x0)) store transactions"
# one transaction per lease would be 4 per pass of 3 renewals (the store's failover count is
# read every ttl/3 too); one per pass is 2
check_true "A renews several leases per store transaction (fewer transactions than renewals)" \
    "$([ $((x1 - x0)) -lt $((r1 - r0)) ] && echo t)"
lost_slot=$(qs -c "SELECT slot FROM cosid_leases('pb2') WHERE state = 'held'")
l0=$(qa -c "SELECT leases_lost FROM cosid_stats()")
qs -c "SELECT * FROM cosid.revoke('pb2', $lost_slot)" >/dev/null
check_true "a lease revoked on the store is found lost in a batched pass, and reported for its namespace" \
    "$(wait_for 20 "A's log of the lost lease" bash -c "grep -q 'lease on slot $lost_slot of namespace \"pb2\" was lost' '$A/server.log' && echo t")"
r2=$(qa -c "SELECT renewals FROM cosid_stats()")
check_true "A's other leases go on renewing" "$(wait_for 20 "A's renewals" qa -c "SELECT renewals >= $r2 + 4 FROM cosid_stats()")"
check "A lost that lease and no other" $((l0 + 1)) "$(qa -c "SELECT leases_lost FROM cosid_stats()")"

qa -c "SELECT id FROM t" > "$base/a.ids"; qb -c "SELECT id FROM t" > "$base/b.ids"
echo "# rows: A $(wc -l < "$base/a.ids"), B $(wc -l < "$base/b.ids")"
check "zero duplicate ids across the two servers" 0 "$(sort "$base/a.ids" "$base/b.ids" | uniq -d | wc -l)"
cat "$base/a.ids" "$base/b.ids" > "$base/all.ids"; chmod a+r "$base/all.ids"
qs -c "CREATE TABLE ids (id bigint)" -c "\\copy ids FROM '$base/all.ids'" >/dev/null
check "every id inside a window the store granted to its slot" 0 "$(qs -c "
    WITH w AS (SELECT slot, fence, incarnation, min(floor) AS floor, max(ceiling) AS ceiling
               FROM observed WHERE namespace = 'pb' AND incarnation IS NOT NULL GROUP BY 1, 2, 3),
         p AS (SELECT p.slot, (extract(epoch FROM p.ts) * 1000)::bigint AS ts FROM ids, cosid_parse(ids.id, 'pb') p)
    SELECT count(*) FROM p WHERE NOT EXISTS (
        SELECT 1 FROM w WHERE w.slot = p.slot AND p.ts > w.floor AND p.ts <= w.ceiling)")"
for s in A B; do
    d=${!s}
    grep -E 'cosid.*(renewal|acquire|release|store).*(fail|cannot|again)' "$d/server.log" | head -4 | sed "s/^/#   $s: /"
    check "$s's keeper logged the restart as one outage" 1 \
        "$(grep -cE 'cosid: renewal of slot [0-9]+ in "pb" failed' "$d/server.log")"
done
assert_store_verified "$S" "$PS" postgres "S, the store behind PgBouncer"
exit $FAIL
