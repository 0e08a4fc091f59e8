#!/usr/bin/env bash
# Behind a pooler (issue 10): PgBouncer in transaction pooling mode, 50 clients on 10 server
# connections, inserting with DEFAULT cosid_next().  Transactions of one client land on any
# server connection: every connection issues from the instance's one lease, so the store
# sees one slot, and ids are unique and all on that slot.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
dir="${1:-/tmp/cosid-e2e}/pooler"; port=55466; bport=55467
node_up main "$dir" "$port" "cosid.ttl = '3s'"
trap 'kill $(jobs -p) 2>/dev/null || true; [ -f "$dir/pgbouncer.pid" ] && kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null;
      node_stop_all immediate' EXIT
q -c "CREATE EXTENSION cosid" -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), client int)" >/dev/null

cat > "$dir/pgbouncer.ini" <<INI
[databases]
postgres = host=$dir port=$port dbname=postgres user=postgres

[pgbouncer]
listen_addr =
listen_port = $bport
unix_socket_dir = $dir
auth_type = any
pool_mode = transaction
default_pool_size = 10
max_client_conn = 100
pidfile = $dir/pgbouncer.pid
logfile = $dir/pgbouncer.log
INI
chown "$PG_USER" "$dir/pgbouncer.ini"
as_pg pgbouncer -d "$dir/pgbouncer.ini"
check_true "PgBouncer accepts connections" "$(wait_until 10 as_pg "$PG_BIN/psql" -X -At -h "$dir" -p "$bport" -d postgres -c "SELECT true")"

cat > "$dir/insert.sql" <<'SQL'
INSERT INTO t(client) SELECT :client_id FROM generate_series(1, 10);
SQL
chown "$PG_USER" "$dir/insert.sql"
as_pg pgbench -n -h "$dir" -p "$bport" -c 50 -j 2 -T 6 -f "$dir/insert.sql" postgres > "$dir/pgbench.log" 2>&1 || FAIL=1
grep -E "actually processed|failed" "$dir/pgbench.log" | sed 's/^/# /'
rows=$(q -c "SELECT count(*) FROM t")
check_true "50 clients inserted through the pooler ($rows rows)" "$([ "$rows" -gt 5000 ] && echo t)"
check "zero duplicate ids" 0 "$(q -c "SELECT count(*) - count(DISTINCT id) FROM t")"
check "no failed transaction" 0 "$(grep -c 'aborted\|ERROR' "$dir/pgbench.log" || true)"
check "every id on one slot" 1 "$(q -c "SELECT count(DISTINCT p.slot) FROM t, cosid_parse(t.id) p")"
check "the store holds one slot for the instance" 1 "$(q -c "SELECT count(*) FROM cosid.lease WHERE incarnation IS NOT NULL")"
check_true "at most 10 server connections issued (the pool's backends on the lease)" "$(q -c "
    SELECT sum(backends) BETWEEN 1 AND 10 FROM cosid_pool() WHERE state = 'active'")"
check "one acquire in all" 1 "$(q -c "SELECT acquires FROM cosid_stats()")"
check "a sample of 200 ids: each has one issuer in the store's history, this server's lease" 0 "$(q -c "
    SELECT count(*) FROM (SELECT id FROM t ORDER BY random() LIMIT 200) s
    WHERE (SELECT count(*) FILTER (WHERE i.owner_key = (SELECT owner_key FROM cosid_stats())) || '/' || count(*)
             FROM cosid_issuer(s.id) i) <> '1/1'")"
assert_store_verified "$dir" "$port" postgres
exit $FAIL
