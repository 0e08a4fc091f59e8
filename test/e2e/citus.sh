#!/usr/bin/env bash
# cosid on Citus (issue 24, docs/citus.md): a coordinator that holds the lease store and two
# workers (metadata synced) whose keepers lease from it (cosid.store_dsn, a cosid_keeper
# role).  Tables distributed by a tenant column and by the cosid id itself, and a reference
# table; clients write through every node by VALUES, prepared statements, COPY and
# INSERT ... SELECT.  Then a third worker is added without cosid.store_dsn: it must refuse
# to issue (ZC006, naming the coordinator) instead of issuing from a store of its own (before
# the guard it leased slot 0 of its own store, as the coordinator does: the same ids); once
# given the setting it joins and writes too.  Checks: zero duplicates, one slot per node,
# every id inside a window the coordinator's store granted to that node, ids in time order
# across nodes within the tolerance.
#
# Needs the Citus build for PostgreSQL 15 in ../shared/citus (COSID_CITUS_TARBALL overrides);
# without it the script says so and passes.  It installs the tarball into the PostgreSQL it
# runs against (the prefix of that pg_config).
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"

source "$(dirname "${BASH_SOURCE[0]}")/../lib/citus.sh"
citus_install || exit 0

t_start=$(date +%s)
log() { printf '\n==> %s (at %s s)\n' "$*" $(( $(date +%s) - t_start )); }
base="${1:-/tmp/cosid-e2e}/citus"
C="$base/coord"; W1="$base/w1"; W2="$base/w2"; W3="$base/w3"; X="$base/wrong_order"
PC=26001; P1=26002; P2=26003; P3=26004; PX=26005
[ -n "${KEEP:-}" ] || trap 'kill $(jobs -p) 2>/dev/null || true; node_stop_all immediate' EXIT
# the nodes: x (wrong order), c (the coordinator: qc), w1, w2, w3 (workers: qw1, qw2, qw3), on database app

# The nodes are set up by docs/citus.md's own blocks (test/meta/doc_blocks.py --steps), in page
# order. What the test changes, and nothing else: the hosts (all nodes are 127.0.0.1, listening
# there only), the ports (one per node), the network in pg_hba.conf, and where each node's
# .pgpass is (one per node on this one host: the server is started with PGPASSFILE); for
# worker 2 (and the worker added later, 3) the keeper role and password of worker 1 are
# renamed, as the page says. Beside the page's settings the test sets its own: the port and
# socket, a short cosid.ttl (3 s), an owner key per node, max_connections.
PAGE="$COSID_ROOT/docs/citus.md"
rm -rf "$base"; mkdir -p "$base/steps"
steps=$(python3 "$COSID_ROOT/test/meta/doc_blocks.py" --steps "$PAGE" "$base/steps")
chown -R "$PG_USER" "$base/steps"
block() {  # block KIND [TEXT]: the step file of the first block of KIND whose argument is TEXT or whose text has it
    local file kind arg line
    # shellcheck disable=SC2034  # line: the rest of the row, kept out of arg
    while read -r file kind arg line; do
        [ "$kind" = "$1" ] && { [ -z "${2:-}" ] || [ "$arg" = "$2" ] || grep -qF -- "$2" "$file"; } && { echo "$file"; return; }
    done <<<"$steps"
    echo "/nonexistent: no $1 block${2:+ with $2} in docs/citus.md"
}
page() {  # page FILE [N]: the page's block for node N (1, 2, 3: a worker; C: the coordinator)
    local w=${2:-C}
    # shellcheck disable=SC2046  # none or four sed arguments
    sed -e "s/^listen_addresses = '\*'/listen_addresses = '127.0.0.1'/" -e "s|10\.0\.0\.0/24|127.0.0.1/32|g" \
        -e "s|~postgres/\.pgpass|$base/pgpass.${2:-C}|g" -e "s/\*:5432:/*:*:/g" \
        -e "s/COORDINATOR:5432:/127.0.0.1:$PC:/g" -e "s/host=COORDINATOR port=5432/host=127.0.0.1 port=$PC/g" \
        -e "s/'COORDINATOR', 5432/'127.0.0.1', $PC/g" -e "s/COORDINATOR port 5432/127.0.0.1 port $PC/g" \
        -e "s/'WORKER1', 5432/'127.0.0.1', $P1/g" -e "s/'WORKER2', 5432/'127.0.0.1', $P2/g" \
        $( [ "$w" = C ] || [ "$w" = 1 ] || echo "-e s/keeper_w1/keeper_w$w/g -e s/w1-secret/w$w-secret/g" ) "$1"
}
# page_node NAME DIR PORT N: node NAME made as the page says (its postgresql.conf lines: for a worker
# with a store, N 1 2 3, the store's too; its pg_hba.conf line), started; then the page's
# password and .pgpass step, and its database with Citus.
page_node() {
    local name=$1 d=$2 p=$3 w=$4
    node_register "$name" "$d" "$p"
    # shellcheck disable=SC2034  # NODE_DB: read by test/lib/node.sh
    NODE_DB[$name]=app
    rm -rf "$d"; mkdir -p "$d"; chown "$PG_USER" "$d"; fresh_cluster "$d/data"
    { printf "port = %s\nunix_socket_directories = '%s'\nfsync = off\nmax_connections = 100\n" "$p" "$d"
      # (no lease handed back for being idle: on a loaded machine a node's lease sat idle past
      # the 60 s default between the phases, and its next acquire got another slot)
      printf "cosid.ttl = '3s'\ncosid.owner_key = 'node-%s'\ncosid.pool_idle_timeout = '1h'\n" "$p"
      page "$(block conf "shared_preload_libraries")" "$w"
      case "$w" in [0-9]) page "$(block conf cosid.store_dsn)" "$w" ;; esac
    } >> "$d/data/postgresql.conf"
    # Debian's socket line for postgres (the test's own psql), then the page's line: nothing else
    # lets a node in over TCP.
    { echo "local   all             postgres                                peer"
      page "$(block conf pg_hba.conf)" "$w"; } > "$d/data/pg_hba.conf"
    PGPASSFILE="$base/pgpass.${w%%-*}" node_start "$name"
    for sh in "$(block sh PGPASS)" "$(block sh createdb)"; do
        local status=0
        page "$sh" "${w%%-*}" > "$sh.$p.run"
        (cd "$base" && env PGHOST="$d" PGPORT="$p" bash -e "$sh.$p.run") > "$sh.$p.out" 2>&1 || status=$?
        check "node $p: docs/citus.md's \`$(head -1 "$sh")\` ... runs without an error" 0 "$status"
        [ "$status" = 0 ] || sed 's/^/#   /' "$sh.$p.out"
    done
}
# same_lines EXPECTED_FILE ACTUAL_TEXT: t when the page's lines (ports and hosts made this
# test's) are exactly the ERROR, DETAIL and HINT lines printed
same_lines() { [ "$(page "$1")" = "$(grep -E '^(ERROR|DETAIL|HINT):' <<<"$2")" ] && echo t || { diff <(page "$1") <(grep -E '^(ERROR|DETAIL|HINT):' <<<"$2") | sed 's/^/#   /' >&2; echo f; }; }

# 'cosid,citus' stops the server (Citus must be loaded first); cosid's line says what to set.
node_register x "$X" "$PX"
rm -rf "$X"; mkdir -p "$X"; chown "$PG_USER" "$X"; fresh_cluster "$X/data"
printf "port = %s\nlisten_addresses = ''\nunix_socket_directories = '%s'\nshared_preload_libraries = 'cosid,citus'\n" \
    "$PX" "$X" >> "$X/data/postgresql.conf"
node_start x -t 20 2>/dev/null && started=t || started=f
check "shared_preload_libraries = 'cosid,citus' does not start (Citus must be first)" f "$started"
logged=$(sed -E 's/^[^]]*\] //' "$X/server.log")
check_true "the log's lines are those docs/citus.md shows (LOG, DETAIL, HINT naming 'citus,cosid', Citus' FATAL)" \
    "$(while IFS= read -r l; do grep -qxF -- "$l" <<<"$logged" || echo "missing: $l"; done < "$(block output 'loaded before citus')" | grep -q . && echo f || echo t)"

log "coordinator (the store) and two workers leasing from it: docs/citus.md's setup"
page_node c "$C" $PC C
page_node w1 "$W1" $P1 1
page_node w2 "$W2" $P2 2
status=0
page "$(block sql citus_add_node)" > "$base/setup.sql"; chown "$PG_USER" "$base/setup.sql"
qc -f "$base/setup.sql" > "$base/setup.out" 2>&1 || status=$?
check "docs/citus.md's SQL on the coordinator (nodes, cosid, keeper roles, namespace, tables) runs without an error" 0 "$status"
[ "$status" = 0 ] || tail -5 "$base/setup.out" | sed 's/^/#   /'
# Every change of a lease row in the coordinator's store, in the store's own transaction
# (test/lib/faults.sh): every window granted or renewed, whoever asked.
qc >/dev/null <<'SQL'
SET citus.enable_ddl_propagation = off;  -- the record is the coordinator's alone
CREATE TABLE observed (namespace text, slot int, fence bigint, incarnation uuid, owner_key text,
                       floor bigint, ceiling bigint);
CREATE FUNCTION observe_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.observed VALUES (NEW.namespace, NEW.slot, NEW.fence, NEW.incarnation, NEW.owner_key,
                                        NEW.floor, NEW.ceiling);
    RETURN NULL;
END $$;
CREATE TRIGGER observe_lease AFTER INSERT OR UPDATE ON cosid.lease FOR EACH ROW EXECUTE FUNCTION observe_lease();
ALTER TABLE cosid.lease ENABLE ALWAYS TRIGGER observe_lease;
SQL
qc >/dev/null <<'SQL'
CREATE TABLE by_tenant (tenant int, id bigint DEFAULT cosid_next(), at timestamptz DEFAULT clock_timestamp(),
                        path text, PRIMARY KEY (tenant, id));
SELECT create_distributed_table('by_tenant', 'tenant', shard_count => 8);
CREATE TABLE by_id (id bigint PRIMARY KEY DEFAULT cosid_next(), at timestamptz DEFAULT clock_timestamp(), path text);
SELECT create_distributed_table('by_id', 'id', shard_count => 8);
CREATE TABLE ref (id bigint PRIMARY KEY DEFAULT cosid_next(), at timestamptz DEFAULT clock_timestamp(), path text);
SELECT create_reference_table('ref');
CREATE TABLE src (tenant int, k int);
SELECT create_distributed_table('src', 'tenant', colocate_with => 'by_tenant');
INSERT INTO src SELECT g % 16, g FROM generate_series(1, 64) g;
SQL
for n in C W1 W2; do
    check_true "cosid_next() works on $n" "$(wait_for 60 "a first id on $n" node_sql "${n,,}" \
        -c "SELECT cosid_next() > 0")"
    # the page's tables, through this node: its namespace (made on the coordinator) included
    node_sql "${n,,}" -c "INSERT INTO orders(tenant, note) SELECT g, '$n' FROM generate_series(1, 5) g" \
        -c "INSERT INTO events(payload) SELECT '{}' FROM generate_series(1, 5)" -c "INSERT INTO countries(name) VALUES ('$n')" 2>&1 | sed 's/^/# /' || true
done
check "docs/citus.md's tables took rows through every node (orders, events, countries)" "15 15 3" \
    "$(qc -F' ' -c "SELECT (SELECT count(DISTINCT id) FROM orders), (SELECT count(DISTINCT id) FROM events), (SELECT count(DISTINCT id) FROM countries)")"
check "the orders rows' ids are in the page's namespace orders" 15 "$(qc -c "SELECT count(*) FROM orders WHERE id <= cosid_max_id(now(), 'orders') AND id >= cosid_min_id(now() - interval '1 hour', 'orders')")"

# What Citus refuses, and the IMMUTABLE decoder that serves RETURNING instead (docs/citus.md).
out=$(qc -c "INSERT INTO by_tenant(tenant, path) VALUES (1, 'values') RETURNING cosid_timestamp(id)" 2>&1 || true)
check "Citus refuses RETURNING cosid_timestamp(id)" 1 "$(grep -c 'non-IMMUTABLE functions are not allowed' <<<"$out")"
read -r rid rts <<<"$(qw1 -F' ' -c "INSERT INTO by_tenant(tenant, path) VALUES (2, 'values')
    RETURNING id, (cosid.unpack(id, 41, 10, 12, 1704067200000, 'ms')).ts_ms")"
check_true "RETURNING (cosid.unpack(id, <layout>)).ts_ms gives the id's time (through a worker)" \
    "$(qc -c "SELECT cosid_timestamp($rid) = to_timestamp($rts / 1000.0)")"
out=$(qc -c "UPDATE by_tenant SET id = cosid_next() WHERE tenant = 2" 2>&1 || true)
check "Citus refuses UPDATE ... SET id = cosid_next()" 1 "$(grep -c 'must not be VOLATILE' <<<"$out")"
before=$(qc -c "SELECT ids_issued FROM cosid_stats()")
qc -c "EXPLAIN INSERT INTO by_id(path) VALUES ('explain'), ('explain')" >/dev/null
check "a plain EXPLAIN of an INSERT consumes ids (Citus evaluates the defaults to route rows)" 2 \
    "$(( $(qc -c "SELECT ids_issued FROM cosid_stats()") - before ))"

# client NODE N: until $base/stop, rounds of every write path through that node, CLIENT_PACE apart.
client() {
    local n=$1 c=$2 round=0
    (
        trap - EXIT; set +e
        while [ ! -e "$base/stop" ]; do
            round=$((round + 1))
            {
                echo "INSERT INTO by_tenant(tenant, path) SELECT g % 16, 'values' FROM (VALUES (1),(2),(3),(4),(5),(6),(7),(8)) v(g);"
                echo "INSERT INTO by_tenant(tenant, path) VALUES ($c, 'values'), ($((c + 1)), 'values');"
                echo "INSERT INTO by_id(path) VALUES ('values'), ('values'), ('values');"
                echo "INSERT INTO ref(path) VALUES ('values');"
                echo "PREPARE pt(int) AS INSERT INTO by_tenant(tenant, path) VALUES (\$1, 'prepared');"
                echo "PREPARE pi AS INSERT INTO by_id(path) VALUES ('prepared');"
                for i in 1 2 3 4 5 6 7; do echo "EXECUTE pt($i); EXECUTE pi;"; done
                echo "COPY by_tenant(tenant, path) FROM STDIN;"
                for i in $(seq 1 20); do printf '%s\tcopy\n' $((i % 16)); done
                echo '\.'
                echo "COPY by_id(path) FROM STDIN;"
                for i in $(seq 1 10); do echo copy; done
                echo '\.'
                echo "INSERT INTO by_tenant(tenant, path) SELECT tenant, 'insert-select' FROM src;"
                echo "INSERT INTO by_id(path) SELECT 'insert-select' FROM src WHERE k % 4 = $((round % 4));"
            } | node_sql "$n" >/dev/null 2>>"$base/clients.err" \
                && echo ok || echo failed
            sleep "$CLIENT_PACE"  # (rounds, not density, are what the checks read)
        done > "$base/client.$n.$c.log"
    ) &
}
run_clients() {  # run_clients SECONDS NODE...
    local secs=$1; shift
    rm -f "$base/stop"
    local pids=() c=0 n
    for n in "$@"; do
        # shellcheck disable=SC2034  # k: two clients per node, the counter unused
        for k in 1 2; do c=$((c + 1)); client "$n" $c; pids+=($!); done
    done
    sleep "$secs"  # the load's duration, not a wait for a condition
    touch "$base/stop"
    wait "${pids[@]}" 2>/dev/null || true
}

log "clients write through the coordinator and both workers"
: > "$base/clients.err"
run_clients 8 c w1 w2
check "no client statement failed" 0 "$(cat "$base"/client.*.log | grep -c failed || true)"
if [ -s "$base/clients.err" ]; then head -5 "$base/clients.err" | sed 's/^/# /'; fi
check_true "rows arrived through every node by every path" "$(qc -c "
    SELECT count(DISTINCT path) = 4 FROM by_tenant")"

log "a server issuing from its own store, added as a third worker without cosid.store_dsn"
page_node w3 "$W3" $P3 3-no-store  # the page's node settings, its own store (no cosid.store_dsn)
qw3 -c "CREATE EXTENSION cosid" >/dev/null
check_true "standalone, it issues from its own store" "$(qw3 -c "SELECT cosid_next() > 0")"
qc -c "SELECT citus_add_node('127.0.0.1', $P3)" >/dev/null
# The keeper's guard looks every second: its lease is released, and no id comes after.
check_true "within 10 s of citus_add_node it stops issuing" "$(wait_for 10 "cosid_next() refused on w3" qw3 -c "
    SELECT NOT EXISTS (SELECT 1 FROM cosid_pool() WHERE namespace = 'default')")"
out=$(qw3 -v VERBOSITY=verbose -c "SELECT cosid_next()" 2>&1 || true)
check "cosid_next() on a worker without cosid.store_dsn is refused with ZC006" 1 "$(grep -c 'ERROR:  ZC006' <<<"$out")"
check_true "its ERROR, DETAIL and HINT (naming cosid.store_dsn and the coordinator) are those docs/citus.md shows" \
    "$(same_lines "$(block output 'ZC006')" "$out")"
grep -E 'ERROR|DETAIL|HINT' <<<"$out" | sed 's/^/# /' || true
# Bursts through it and through the node that holds slot 0 of the coordinator's store at
# once (other tenants: no key to collide on): before the guard w3 issued from slot 0 of its
# own store, and the two made the same ids.
p0=$(qc -c "SELECT substr(owner_key, 6) FROM cosid_leases('default') WHERE slot = 0 AND state = 'held'")
n0=c; for n in w1 w2; do [ "$p0" = "$(node_port $n)" ] && n0=$n; done
burst() {  # burst TENANT PATH: 1 s of 50-row inserts, one after the other (ids in most ms)
    echo "DO \$\$ DECLARE t0 timestamptz := clock_timestamp(); BEGIN
          WHILE clock_timestamp() < t0 + interval '1 s' LOOP
              INSERT INTO by_tenant(tenant, path) SELECT $1, '$2' FROM generate_series(1, 50);
          END LOOP; END \$\$"
}
node_sql "$n0" -c "$(burst 2 values)" &
burst=$!
out=$(qw3 -v VERBOSITY=sqlstate -c "$(burst 1 w3-no-store)" 2>&1 || true)
wait $burst
check "an insert through it is refused with ZC006" 1 "$(grep -c 'ERROR:  ZC006' <<<"$out")"
check "the worker's own store holds no live lease" 0 "$(qw3 -c "SELECT count(*) FROM cosid.lease WHERE incarnation IS NOT NULL")"
check "no row came from it" 0 "$(qc -c "SELECT count(*) FROM by_tenant WHERE path = 'w3-no-store'")"
# Namespaces and adoption belong to the coordinator, whichever worker is asked.
out=$(qw1 -v VERBOSITY=verbose -c "SELECT cosid_namespace_create('elsewhere')" 2>&1 || true)
check_true "cosid_namespace_create on a worker is refused (55000) naming the coordinator, as docs/citus.md shows" \
    "$(same_lines "$(block output '55000')" "$out")"
qw1 -c "CREATE TABLE legacy (id bigint)" -c "INSERT INTO legacy VALUES (42)" >/dev/null
out=$(qw1 -v VERBOSITY=sqlstate -c "SELECT * FROM cosid_adopt('legacy', 'id')" 2>&1 || true)
check "cosid_adopt on a worker is refused (55000)" 1 "$(grep -c 'ERROR:  55000' <<<"$out")"
check "cosid_namespace_create on the coordinator still works" "" "$(qc -c "SELECT cosid_namespace_create('elsewhere')")"

log "the new worker given the coordinator's store joins"
# its keeper role, made on the coordinator as the page makes worker 1's
qc -c "$(page "$(block sql citus_add_node)" 3 | grep -m1 'CREATE ROLE keeper_w3')" >/dev/null
node_stop w3
page "$(block conf cosid.store_dsn)" 3 >> "$W3/data/postgresql.conf"
PGPASSFILE="$base/pgpass.3" node_start w3
check_true "cosid_next() works on the new worker" "$(wait_for 60 "a first id on w3" qw3 -c "SELECT cosid_next() > 0")"
run_clients 4 c w1 w2 w3
check "no client statement failed with four nodes" 0 "$(cat "$base"/client.*.log | grep -c failed || true)"

n=0
log "time order across nodes: one writer going round the four nodes"
{
    for i in $(seq 1 6); do
        for node in c w1 w2 w3; do
            echo "\\connect \"host=$(node_dir $node) port=$(node_port $node) dbname=app\""
            printf "INSERT INTO by_id(path) VALUES ('probe:%04d:%s');\n" "$n" "$(node_port $node)"
            n=$((n + 1))
        done
    done
} | qc >/dev/null
# Each insert happened after the one before it, on another node: its id must be larger.
check "24 inserts going round the nodes: ids in the order they were made" 0 "$(qc -c "
    SELECT count(*) FROM (SELECT id, lag(id) OVER (ORDER BY path) AS before FROM by_id WHERE path LIKE 'probe:%') x
    WHERE id < before")"

log "checks"
rows="SELECT id, at, path FROM by_tenant UNION ALL SELECT id, at, path FROM by_id UNION ALL SELECT id, at, path FROM ref"
total=$(qc -c "SELECT count(*) FROM ($rows) r")
check "zero duplicate ids over $total rows (3 tables, 4 nodes)" 0 "$(qc -c "SELECT count(*) - count(DISTINCT id) FROM ($rows) r")"
# The windows the store granted, per owner (node) and slot.
check "one slot per node over the run (4 nodes, 4 distinct slots)" "4 4" "$(qc -F' ' -c "
    SELECT count(DISTINCT owner_key), count(DISTINCT slot) FROM observed WHERE incarnation IS NOT NULL")"
check "no node leased more than one slot" 0 "$(qc -c "
    SELECT count(*) FROM (SELECT owner_key FROM observed WHERE incarnation IS NOT NULL
                          GROUP BY 1 HAVING count(DISTINCT slot) > 1) x")"
check "every id inside a window the coordinator's store granted to its slot" 0 "$(qc -c "
    WITH w AS (SELECT slot, fence, min(floor) AS floor, max(ceiling) AS ceiling FROM observed
               WHERE incarnation IS NOT NULL GROUP BY 1, 2),
         p AS (SELECT p.slot, (extract(epoch FROM p.ts) * 1000)::bigint AS ms FROM ($rows) r, cosid_parse(r.id) p)
    SELECT count(*) FROM p WHERE NOT EXISTS (
        SELECT 1 FROM w WHERE w.slot = p.slot AND p.ms > w.floor AND p.ms <= w.ceiling)")"
check "ids came from the slots of all four nodes" 4 "$(qc -c "SELECT count(DISTINCT cosid_slot(id)) FROM ($rows) r")"
# No node issues ahead of its clock by more than the tolerance (1 s): an id's time is at most
# that far after its row's clock_timestamp(), taken after it.  (Behind it by more than the
# statement's own time happens: Citus may evaluate the two defaults apart; the figure is shown.)
check "no id more than 1 s ahead of its row's clock_timestamp()" 0 "$(qc -c "
    SELECT count(*) FROM ($rows) r WHERE cosid_timestamp(id) - at > interval '1 s'")"
echo "# id time minus clock_timestamp(): $(qc -c "SELECT format('min %s ms, max %s ms, p99 %s ms',
    round(min(d)), round(max(d)), round(percentile_cont(0.99) WITHIN GROUP (ORDER BY d)::numeric))
    FROM (SELECT extract(epoch FROM cosid_timestamp(id) - at) * 1000 AS d FROM ($rows) r) x")"
echo "# rows by path: $(qc -F= -c "SELECT split_part(path, ':', 1), count(*) FROM ($rows) r GROUP BY 1 ORDER BY 1" | tr '\n' ' ')"
echo "# citus.sh took $(( $(date +%s) - t_start )) s"
assert_store_verified "$C" "$PC" app "the coordinator's store (database app)"
exit $FAIL
