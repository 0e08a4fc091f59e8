#!/usr/bin/env bash
# One lease per namespace for the whole instance, shared lock-free by its backends (issue 10):
#   - 150 connections that each called cosid_next() hold one slot, not 150;
#   - ids of one instance are strictly increasing in issue order across its backends: each
#     id is larger than every id any client had committed before its statement began;
#   - a lost lease fails the next call of every backend that issued on it, once (ZC001),
#     then they go on with the instance's next lease;
#   - a backend uses as many namespaces as the instance can hold: 200 in one backend, and
#     50 backends using 20 each; past cosid.max_namespaces a clear error;
#   - cosid.max_borrow = 0: a tight loop never issues ahead of the clock.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
dir="${1:-/tmp/cosid-e2e}/shared_slot"; port=55464
node_up main "$dir" "$port" "cosid.ttl = '3s'" "max_connections = 220" "cosid.max_namespaces = 220"
trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT
q -c "CREATE EXTENSION cosid" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), client int, before_max bigint)" >/dev/null
held() { q -c "SELECT count(*) FROM cosid.lease WHERE namespace = '$1' AND incarnation IS NOT NULL"; }

echo "# 1. 150 connections, each calling cosid_next() once and staying open"
# Each waits at a barrier after its call, until the checks below have seen all 150 at once.
barrier_close 22001
for i in $(seq 1 150); do
    # (no ON_ERROR_STOP: a session whose call fails still waits at the barrier)
    q -v ON_ERROR_STOP=0 -c "SELECT cosid_next()" \
        -c "SELECT 'go' FROM pg_advisory_lock_shared(22001)" >/dev/null 2>&1 &
done
v=$(wait_for 120 "150 sessions at the barrier" barrier_waiters 150)
[ "$v" = t ] || echo "# sessions at the barrier: $(barrier_waiting)"
check_true "150 backends issued" "$v"
check "slots the instance holds in the store" 1 "$(held default)"
check "one lease in the pool, used by the 150 backends" "1 150" "$(q -c "
    SELECT count(*) || ' ' || sum(backends) FROM cosid_pool() WHERE namespace = 'default' AND state = 'active'")"
acquires=$(q -c "SELECT acquires FROM cosid_stats()")
check "one acquire for all of them" 1 "$acquires"
barrier_open
wait

echo "# 2. strictly increasing in issue order across 8 concurrent clients"
cat > "$dir/order.sql" <<'SQL'
INSERT INTO t(client, before_max, id)
SELECT :client_id, (SELECT coalesce(max(id), 0) FROM t), cosid_next() FROM generate_series(1, 20);
SQL
chown "$PG_USER" "$dir/order.sql"
as_pg pgbench -n -h "$dir" -p "$port" -c 8 -j 2 -t 80 -f "$dir/order.sql" postgres > "$dir/order.log" 2>&1 || FAIL=1
rows=$(q -c "SELECT count(*) FROM t")
echo "# rows: $rows; $(grep -E 'actually processed|failed' "$dir/order.log" | tr '\n' ' ')"
check_true "a real load ran" "$([ "$rows" -gt 10000 ] && echo t)"
check "no id at or below an id committed before its statement began" 0 "$(q -c "SELECT count(*) FROM t WHERE id <= before_max")"
check "every id on the one slot" 1 "$(q -c "SELECT count(DISTINCT p.slot) FROM t, cosid_parse(t.id) p")"
check "no failed transaction" 0 "$(grep -c 'aborted\|ERROR' "$dir/order.log" || true)"

echo "# 2b. a block of ids lives for one statement only: COPY and DO start statements too"
# A's 4 ids in one statement end in a block of 4 with 3 unused; B then commits an id; A's
# next statement (a COPY, then a DO with a PL/pgSQL assignment, neither of which starts an
# executor before its first id) must issue above B's.
cat > "$dir/blocks.sql" <<SQL
CREATE TABLE ord (id bigint PRIMARY KEY DEFAULT cosid_next(), who text);
INSERT INTO ord(who) SELECT 'a1' FROM generate_series(1, 4);
\\! psql -X -q -h $dir -p $port -d postgres -c "INSERT INTO ord(who) VALUES ('b1')"
COPY ord(who) FROM STDIN;
a2
\\.
INSERT INTO ord(who) SELECT 'a3' FROM generate_series(1, 4);
\\! psql -X -q -h $dir -p $port -d postgres -c "INSERT INTO ord(who) VALUES ('b2')"
DO \$\$ DECLARE x bigint; BEGIN x := cosid_next(); INSERT INTO ord(id, who) VALUES (x, 'a4'); END \$\$;
SQL
chown "$PG_USER" "$dir/blocks.sql"
q -f "$dir/blocks.sql" > "$dir/blocks.out" 2>&1 || FAIL=1
check "the COPY after B's commit issues above B's id" t "$(q -c "SELECT (SELECT id FROM ord WHERE who = 'a2') > (SELECT id FROM ord WHERE who = 'b1')")"
check "the DO after B's commit issues above B's id" t "$(q -c "SELECT (SELECT id FROM ord WHERE who = 'a4') > (SELECT id FROM ord WHERE who = 'b2')")"

echo "# 3. a lost lease: every backend that issued on it fails once (ZC001), then goes on"
cat > "$dir/lost.sql" <<'SQL'
\set VERBOSITY sqlstate
SELECT 'first ' || (cosid_parse(cosid_next())).slot;
SELECT 'go' FROM pg_advisory_lock_shared(22003);
SELECT 'after ' || cosid_next();
SELECT 'again ' || p.slot || ' ' || (SELECT fence FROM cosid_pool() c WHERE c.namespace = 'default' AND c.slot = p.slot
                                       AND c.state = 'active') FROM cosid_parse(cosid_next()) p;
SQL
chown "$PG_USER" "$dir/lost.sql"
barrier_close 22003   # they wait there, after their first id, until the lease is lost
# (no ON_ERROR_STOP: each goes on after its ZC001)
for i in 1 2 3; do q -v ON_ERROR_STOP=0 -f "$dir/lost.sql" > "$dir/lost.$i.out" 2>&1 & done
check_true "3 backends on the lease" "$(wait_for 60 "3 sessions at the barrier" barrier_waiters 3)"
check_true "... the 3 of them" "$(q -c "SELECT sum(backends) >= 3 FROM cosid_pool() WHERE namespace = 'default' AND state = 'active'")"
read -r slot fence < <(q -F ' ' -c "SELECT slot, fence FROM cosid_pool() WHERE namespace = 'default' AND state = 'active'")
lost0=$(q -c "SELECT leases_lost FROM cosid_stats()")
q -c "SELECT * FROM cosid.revoke('default', $slot)" >/dev/null
check_true "the keeper finds the lease lost" "$(wait_until 5 q -c "SELECT leases_lost > $lost0 FROM cosid_stats()")"
# a backend that had not issued on it goes on without an error
check_true "a backend that never used the lost lease gets an id without error" "$(q -c "SELECT cosid_next() > 0")"
barrier_open
wait
check "each of the 3 fails its next call once with ZC001" 3 "$(cat "$dir"/lost.*.out | grep -c 'ERROR:  ZC001')"
# (a lease is its slot and fence: once the lost lease's ceiling has passed, which on a loaded
# machine it may have, the store rightly gives the instance the same slot back, sticky)
check "then each issues again on the instance's next lease" 3 "$(cat "$dir"/lost.*.out | grep '^again ' |
    awk -v s="$slot" -v f="$fence" 'NF == 3 && ($2 != s || $3 > f)' | wc -l)"

echo "# 4. namespaces: 200 in one backend, 20 each in 50 backends at once"
# Leases of 20 s here (3 s above, for the lost lease): the keeper renews 200 leases a pass,
# and a loaded 2-core machine must not let one run out while 1,000 calls wait, each up to
# acquire_timeout (which is the ttl unless set).  What this section shows is the sharing.
q -c "ALTER SYSTEM SET cosid.ttl = '20s'" -c "ALTER SYSTEM SET cosid.acquire_timeout = '60s'" -c "SELECT pg_reload_conf()" >/dev/null
check_true "the keeper has the 20 s ttl" "$(wait_until 30 bash -c "grep -q 'cosid.ttl is now 20000 ms' '$dir/server.log' && echo t")"
q -c "SELECT cosid_namespace_create('n' || g, slot_bits => 4) FROM generate_series(1, 200) g" >/dev/null
check "one backend issues in 200 namespaces" 200 "$(q -c "SELECT count(DISTINCT (g, cosid_next('n' || g))) FROM generate_series(1, 200) g")"
check "the instance holds 200 leases (one per namespace)" 200 "$(q -c "SELECT count(*) FROM cosid.lease WHERE namespace LIKE 'n%' AND incarnation IS NOT NULL")"
# (each namespace is an id space of its own: ids are unique per namespace)
q -c "CREATE TABLE nsids (ns text, id bigint, PRIMARY KEY (ns, id))" >/dev/null
for b in $(seq 0 49); do
    q -c "INSERT INTO nsids SELECT 'n' || (1 + ($b * 20 + g) % 200), cosid_next('n' || (1 + ($b * 20 + g) % 200))
            FROM generate_series(0, 19) g, generate_series(1, 50)" > "$dir/ns.$b.out" 2>&1 &
done
wait
cat "$dir"/ns.*.out | grep -A2 ERROR | sort | uniq -c | sort -rn | head -8 | sed 's/^/# /' || true
check "50 backends x 20 namespaces x 50 ids, all at once: no error (a duplicate would be 23505)" 0 "$(cat "$dir"/ns.*.out | grep -c ERROR || true)"
check "all 50,000 (namespace, id) stored" 50000 "$(q -c "SELECT count(*) FROM nsids")"
check "still one lease per namespace" 200 "$(q -c "SELECT count(*) FROM cosid.lease WHERE namespace LIKE 'n%' AND incarnation IS NOT NULL")"
q -c "ALTER SYSTEM RESET cosid.ttl" -c "ALTER SYSTEM RESET cosid.acquire_timeout" -c "SELECT pg_reload_conf()" >/dev/null
echo "# 5. cosid.max_borrow = 0: a tight loop never runs ahead of the clock"
q -c "ALTER SYSTEM SET cosid.max_borrow = 0" -c "SELECT pg_reload_conf()" >/dev/null
q -c "SELECT cosid_namespace_create('nb')" >/dev/null
check "no id ahead of the clock that read it (200,000 ids in a tight loop)" 0 "$(q -c "
    SELECT count(*) FROM (SELECT cosid_next('nb') AS id, clock_timestamp() AS at FROM generate_series(1, 200000)) s,
        cosid_parse(s.id, 'nb') p WHERE p.ts > s.at")"
q -c "ALTER SYSTEM RESET cosid.max_borrow" -c "SELECT pg_reload_conf()" >/dev/null
echo "# 6. one namespace past cosid.max_namespaces"
# (no lease released for idleness meanwhile: on a loaded machine the 230 first calls took more
# than the 60 s of cosid.pool_idle_timeout, the first leases went, and the pool never filled)
q -c "ALTER SYSTEM SET cosid.pool_idle_timeout = '1h'" -c "SELECT pg_reload_conf()" >/dev/null
q -c "SELECT cosid_namespace_create('n' || g, slot_bits => 4) FROM generate_series(201, 230) g" >/dev/null
out=$(q -v VERBOSITY=verbose -c "SET cosid.acquire_timeout = '30s'" -c "SELECT count(cosid_next('n' || g)) FROM generate_series(1, 230) g" 2>&1 || true)
check "past cosid.max_namespaces (220): 53000 naming the setting" 1 "$(grep -c 'ERROR:  53000: cosid.s lease pool is full' <<<"$out")"
grep -E 'DETAIL|HINT' <<<"$out" | sed 's/^/#   /'
grep -q 'ERROR:  53000' <<<"$out" || head -3 <<<"$out" | sed 's/^/#   got: /'
q -c "ALTER SYSTEM RESET cosid.pool_idle_timeout" -c "SELECT pg_reload_conf()" >/dev/null

assert_store_verified "$dir" "$port" postgres
exit $FAIL
