#!/usr/bin/env bash
# The remote store's edges found in review (issue 8): instance A keeps its leases in store S
# (cosid.store_dsn).  (3) a store whose commits fail after the rows were sent: A must not
# use a renewal or acquire that was rolled back, so no id lies past the ceiling S committed;
# a release that fails at commit is kept and tried again; a commit whose wait for a
# synchronous standby was cancelled is not relied on either.  (4) S runs synchronous_commit =
# off: A's lease changes on S are flushed before A relies on them, and survive S's crash.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/remote_store_edges"
S="$base/store"; A="$base/a"; PS=55454; PA=55455
stopped=""
trap '[ -n "$stopped" ] && kill -CONT $stopped 2>/dev/null; kill $(jobs -p) 2>/dev/null || true
      node_stop_all immediate' EXIT
astat() { qa -c "SELECT $1 FROM cosid_stats()"; }

node_up s "$S" "$PS"
qs -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('r', slot_bits => 3, tolerance => '300 ms')" \
   -c "CREATE TABLE fail_commit (x int)" \
   -c "CREATE FUNCTION fail_at_commit() RETURNS trigger LANGUAGE plpgsql AS \$\$
       BEGIN
           IF EXISTS (SELECT 1 FROM public.fail_commit) THEN
               RAISE EXCEPTION 'the test refuses this commit' USING ERRCODE = 'serialization_failure';
           END IF;
           RETURN NULL;
       END \$\$" \
   -c "CREATE CONSTRAINT TRIGGER fail_at_commit AFTER UPDATE ON cosid.lease DEFERRABLE INITIALLY DEFERRED
       FOR EACH ROW EXECUTE FUNCTION fail_at_commit()" >/dev/null
node_up a "$A" "$PA" "cosid.store_dsn = 'host=$S port=$PS dbname=postgres user=postgres'" "cosid.ttl = '3s'" \
    "cosid.namespace = 'r'"
qa -c "CREATE EXTENSION cosid" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), phase text)" >/dev/null
load() {  # load PHASE SECONDS: 3 clients inserting, errors included (they are data here)
    echo "INSERT INTO t(phase) SELECT '$1' FROM generate_series(1, 20);" > "$base/$1.sql"; chmod a+r "$base/$1.sql"
    as_pg pgbench -n -h "$A" -p "$PA" -c 3 -T "$2" -f "$base/$1.sql" postgres > "$A/$1.log" 2>&1 || true
}

echo "# item 3: commits on the store fail after the rows were sent"
load warm 2
check_true "A issues ids through S" "$(qa -c "SELECT count(*) > 0 FROM t")"
fail0=$(astat renewal_failures)
qs -c "INSERT INTO fail_commit VALUES (1)" >/dev/null
load failing 6   # twice the ttl: every window would have been extended twice meanwhile
qs -c "CREATE TABLE committed AS SELECT slot, ceiling FROM cosid.lease WHERE namespace = 'r'" >/dev/null
committed=$(qs -c "SELECT string_agg(slot || ':' || ceiling, ' ') FROM committed")
check_true "renewals refused at commit count as failures" "$(qa -c "SELECT renewal_failures > $fail0 FROM cosid_stats()")"
check "no id of A past the ceiling S committed for its slot" 0 "$(qa -c "
    WITH c AS (SELECT split_part(x, ':', 1)::int AS slot, split_part(x, ':', 2)::bigint AS ceiling
               FROM unnest(string_to_array('$committed', ' ')) x),
         p AS (SELECT p.* FROM t, cosid_parse(t.id, 'r') p)
    SELECT count(*) FROM p JOIN c USING (slot) WHERE (extract(epoch FROM p.ts) * 1000)::bigint > c.ceiling")"
echo "# ids while commits failed: $(qa -c "SELECT count(*) FROM t WHERE phase = 'failing'"); client errors: $(grep -ohE 'ERROR:  [^:]*' "$A/failing.log" | sort | uniq -c | tr '\n' ' ')"
# A release refused at commit is kept and tried again: A's idle slots, released on demand.
qa -c "SELECT 1" >/dev/null
released=$(qa -c "SET cosid.acquire_timeout = '1s'" -c "SELECT count(*) FROM cosid_pool() p, cosid_release(p.namespace, p.slot) r WHERE r = 'release pending'")
check_true "a release refused at commit is reported pending, not done" "$([ "${released:-0}" -gt 0 ] && echo t)"
check_true "S still holds those leases for A" "$(qs -c "SELECT count(*) > 0 FROM cosid.lease WHERE namespace = 'r' AND incarnation IS NOT NULL")"
qs -c "DELETE FROM fail_commit" >/dev/null
check_true "once S commits again, the pending releases go through" "$(wait_until 10 qa -c "
    SELECT count(*) = 0 FROM cosid_pool() WHERE state = 'releasing'")"
load after 2
check "zero duplicate ids" 0 "$(qa -c "SELECT count(*) - count(DISTINCT id) FROM t")"
check_true "A issues again once S commits" "$(qa -c "SELECT count(*) > 0 FROM t WHERE phase = 'after'")"

echo "# item 6, remote: a commit on S waiting for a synchronous standby that never answers is not relied on"
qs -c "ALTER SYSTEM SET synchronous_standby_names = 'nobody'" -c "SELECT pg_reload_conf()" >/dev/null
fail0=$(astat renewal_failures)
check_true "A counts renewals whose commit S could not confirm as failures" \
    "$(wait_until 5 qa -c "SELECT renewal_failures > $fail0 FROM cosid_stats()")"
qs -c "ALTER SYSTEM RESET synchronous_standby_names" -c "SELECT pg_reload_conf()" >/dev/null
check_true "renewals succeed again" "$(wait_until 5 qa -c "SELECT renewals > $(astat renewals) FROM cosid_stats()")"

echo "# item 4: S runs synchronous_commit = off; A's lease changes on S are flushed all the same"
qs -c "ALTER SYSTEM SET synchronous_commit = off" -c "SELECT pg_reload_conf()" -c "SELECT cosid_namespace_create('r2', slot_bits => 2)" >/dev/null
check "S's sessions commit asynchronously now" off "$(qs -c "SHOW synchronous_commit")"
stopped=$(qs -c "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE backend_type IN ('walwriter', 'background writer')")
kill -STOP $stopped
f0=$(qs -c "SELECT pg_current_wal_flush_lsn()")
check "A's first id of 'r2' (A's keeper acquires on S)" t "$(qa -c "SELECT cosid_next('r2') > 0")"
inc=$(astat incarnation)
check_true "S flushed the acquire before A issued" "$(qs -c "SELECT pg_current_wal_flush_lsn() > '$f0'")"
kill -9 $stopped; stopped=""
check_true "S is back after its crash" "$(wait_until 60 qs -c "SELECT true")"
check "A's acquire survived S's crash" "$inc" "$(qs -c "SELECT incarnation FROM cosid.lease WHERE namespace = 'r2' AND fence > 0")"
assert_store_verified "$S" "$PS" postgres "S, the store of A (after its crash)"
exit $FAIL
