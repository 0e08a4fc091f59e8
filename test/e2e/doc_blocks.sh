#!/usr/bin/env bash
# The docs' marked SQL blocks (<!-- doc-test: sql --> before the fence: test/meta/doc_blocks.py)
# run as a reader copies them, page after page in one database, against a server that
# preloads cosid with its default settings: each block runs without an error, and what a page
# shows of PostgreSQL's answers is what PostgreSQL prints (the plans, layouts and text forms of docs/ids.md,
# what docs/safety.md says cosid_verify() and cosid_issuer() return, the version of
# docs/upgrades.md). Blocks marked skip (with their reason) do not run; pages with
# other kinds of blocks run in their own tests (check_docs.py checks that one does): here,
# with servers of their own, docs/failover.md (its Patroni callback and cosid_fork_acknowledge()
# on a promoted standby), docs/static-slots.md (its settings), docs/stores.md (a store and an
# instance with password logins) and docs/pooler.md (an instance through Debian's PgBouncer).
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
DIR="${1:-/tmp/cosid-e2e}/doc_blocks"; PORT=29660
trap 'node_stop_all immediate' EXIT
node_up main "$DIR" "$PORT"
# README.md's step 2 first, as a reader comes to the pages: its SQL makes the extension and the
# table orders that the pages' blocks use (README.md has sh blocks too, so doc_blocks.py leaves
# it out of the pages below; readme_start.sh runs the whole page on Debian's clusters).  The
# blocks run through psql_at, as a reader's psql prints their answers (aligned: the checks read
# them), not through the nodes' shorthands (-At).
mkdir -p "$DIR/readme"
for file in $(python3 "$COSID_ROOT/test/meta/doc_blocks.py" --steps "$COSID_ROOT/README.md" "$DIR/readme" | awk '$2 == "sql" {print $1}'); do
    chown -R "$PG_USER" "$DIR/readme"; status=0
    psql_at "$DIR" "$PORT" postgres -v ON_ERROR_STOP=1 -f "$file" > "$file.out" 2>&1 || status=$?
    check "README.md's SQL block ($(basename "$file")) runs without an error" 0 "$status"
    [ "$status" = 0 ] || tail -5 "$file.out" | sed 's/^/#   /'
done
mkdir -p "$DIR/blocks"
pages=$(python3 "$COSID_ROOT/test/meta/doc_blocks.py" "$COSID_ROOT" "$DIR/blocks")
chown -R "$PG_USER" "$DIR/blocks"
check_true "marked blocks found in docs/ids.md and docs/safety.md (README.md's run in readme_start.sh)" \
    "$(grep -q ' docs/ids.md ' <<<"$pages" && grep -q ' docs/safety.md ' <<<"$pages" && echo t || echo f)"
while read -r file page n; do
    [ -n "$file" ] || continue
    status=0
    psql_at "$DIR" "$PORT" postgres -f "$file" > "$file.out" 2>&1 || status=$?
    check "$page: its $n marked block(s) run without an error" 0 "$status"
    [ "$status" = 0 ] || tail -5 "$file.out" | sed 's/^/#   /'
done <<<"$pages"
ids=$(ls "$DIR"/blocks/*-ids.sql.out 2>/dev/null | head -1)
check_true "ids.md: the range on orders is read through its primary key (Bitmap Index Scan on orders_pkey)" \
    "$(grep -q 'Bitmap Index Scan on orders_pkey\|Index Scan using orders_pkey' "$ids" && echo t || echo f)"
check_true "ids.md: an insert today finds this month's partition" \
    "$(grep -qE "events_$(date -u +%Y_%m)" "$ids" && echo t || echo f)"
check_true "ids.md: 'Subplans Removed: 2' and next month's partition scanned, as the page shows" \
    "$(grep -q 'Subplans Removed: 2' "$ids" && grep -qE "Scan on events_$(date -u -d "$(date -u +%Y-%m-15) +1 month" +%Y_%m)" "$ids" && echo t || echo f)"
check_true "ids.md: cosid_layouts lists web and web_s as the page shows" \
    "$(grep -qE '^ *web +\| +53 +\| +41 +\| +4 +\| +8 +\| ms' "$ids" && grep -qE '^ *web_s +\| +53 +\| +31 +\| +10 +\| +12 +\| s ' "$ids" && echo t || echo f)"
check_true "ids.md: cosid_to_text and cosid_format write what the page shows, and cosid_from_text and cosid_from_format read the id back" \
    "$(grep -qE '^ *0SZRv9Y1Ejm +\| +20261203T072017\.816Z-3-0262 *$' "$ids" && grep -qE '^ *386778656946532614 +\| +386778656946532614 *$' "$ids" && echo t || echo f)"
safety=$(ls "$DIR"/blocks/*-safety.sql.out 2>/dev/null | head -1)
check "safety.md: cosid_verify() returns no row (\"an empty result is the answer you want\"), cosid_issuer() one" "(0 rows) (1 row)" \
    "$(grep -E '^\([0-9]+ rows?\)$' "$safety" | paste -sd' ')"
check_true "safety.md: the row names the window's holder: this store's own server, its store role" \
    "$(grep -qE "^ held lease \| [^|]*this store's own server \(cluster [0-9]+\), store role postgres \|" "$safety" && echo t || echo f)"
upgrades=$(ls "$DIR"/blocks/*-upgrades.sql.out 2>/dev/null | head -1)
shown=$(grep -oE "extname = 'cosid'; +-- [0-9.]+" "$COSID_ROOT/docs/upgrades.md" | grep -oE '[0-9.]+$' || true)
check "upgrades.md: extversion after ALTER EXTENSION cosid UPDATE is the version the page shows (and cosid.control's)" \
    "$shown $shown" "$(grep -oE '^ [0-9]+\.[0-9]+$' "$upgrades" | tr -d ' ' | tail -1) $(sed -nE "s/^default_version = '(.*)'/\1/p" "$COSID_ROOT/cosid.control")"

# docs/stores.md and docs/pooler.md, their setups in page order (doc_blocks.py --steps) on
# servers of this machine: the store, instance a leasing from it (stores.md) and instance b
# leasing through PgBouncer (pooler.md). Each SQL block runs where its first line says ("-- on
# the store server", "-- on every instance"); sh blocks run with PGHOST and PGPORT naming the
# store. What the test changes, and nothing else: hosts and ports (store.example:5432 and
# STORE_HOST:5432 are the store here, PGBOUNCER_HOST:6432 this PgBouncer), the instances'
# network in pg_hba.conf, PgBouncer's listen_addr, and the paths of the files (the instance's
# .pgpass, given to it by PGPASSFILE; /etc/pgbouncer is a directory of this test). The store
# authenticates as Debian's pg_hba.conf does on the socket; over TCP only the page's line lets
# anyone in. PgBouncer's file is Debian's /etc/pgbouncer/pgbouncer.ini with the page's settings
# put in their sections (its paths and port this test's).
STORE="$(dirname "$DIR")/doc_blocks_store"; SP=29661
BOUNCER="$(dirname "$DIR")/doc_blocks_bouncer"; BP=29664
bouncer_pid=""
trap '[ -n "$bouncer_pid" ] && kill "$bouncer_pid" 2>/dev/null
      node_stop_all immediate' EXIT
rm -rf "$BOUNCER"
node_up store "$STORE" "$SP" "listen_addresses = '127.0.0.1'" "password_encryption = 'scram-sha-256'"
printf 'local   all             postgres                                peer\n' > "$STORE/data/pg_hba.conf"
as_pg "$(node_bin store)/pg_ctl" -D "$STORE/data" reload >/dev/null  # (no node_ function reloads)
substitute() {  # substitute FILE PGPASS
    sed -e "s/store\.example:5432:/127.0.0.1:$SP:/g" -e "s/host=store\.example port=5432/host=127.0.0.1 port=$SP/g" \
        -e "s/host=STORE_HOST port=5432/host=127.0.0.1 port=$SP/g" -e "s/PGBOUNCER_HOST:6432:/127.0.0.1:$BP:/g" \
        -e "s/host=PGBOUNCER_HOST port=6432/host=127.0.0.1 port=$BP/g" -e "s/^listen_addr = \*/listen_addr = 127.0.0.1/" \
        -e "s|10\.0\.0\.0/24|127.0.0.1/32|g" -e "s|~postgres/\.pgpass|$2|g" -e "s|/etc/pgbouncer/|$BOUNCER/|g" "$1"
}
# run_setup PAGE NAME INSTANCE_PORT: the page's blocks; its instance (node NAME in DIR_NAME) started with the
# page's postgresql.conf lines when its first SQL block comes, or at the end
run_setup() {
    local page=$1 name=$2 ip=$3 steps file kind arg line where status conf=() started=""
    local inst="${DIR}_$name" out="$DIR/$name"
    rm -rf "$out"; mkdir -p "$out"
    steps=$(python3 "$COSID_ROOT/test/meta/doc_blocks.py" --steps "$COSID_ROOT/docs/$page" "$out")
    chown -R "$PG_USER" "$out"
    start_instance() {
        PGPASSFILE="$out/pgpass" node_up "$name" "$inst" "$ip" "${conf[@]}"; started=t
    }
    while read -r file kind arg line; do
        [ -n "$file" ] || continue
        where="$page:$line"; status=0
        case "$kind:$arg:$(head -1 "$file")" in
        "sql:-:-- on the store server")
            psql_at "$STORE" "$SP" postgres -f "$file" > "$file.out" 2>&1 || status=$? ;;
        "sql:-:-- on every instance")
            [ -n "$started" ] || start_instance
            psql_at "$inst" "$ip" postgres -f "$file" > "$file.out" 2>&1 || status=$? ;;
        conf:pg_hba.conf:*)
            substitute "$file" "$out/pgpass" >> "$STORE/data/pg_hba.conf"
            qstore -c "SELECT pg_reload_conf()" > "$file.out" 2>&1 || status=$? ;;
        conf:postgresql.conf:*)
            mapfile -t conf < <(substitute "$file" "$out/pgpass" | grep -v '^ *#') ;;
        conf:pgbouncer.ini:*)
            mkdir -p "$BOUNCER"; : > "$BOUNCER/userlist.txt"  # Debian's: empty
            substitute "$file" "$out/pgpass" > "$file.page"
            python3 - /etc/pgbouncer/pgbouncer.ini "$file.page" "$BOUNCER" "$BP" > "$BOUNCER/pgbouncer.ini" <<'PY' || status=$?
import re, sys
base, page, where, port = sys.argv[1:]
lines = open(base).read().split('\n')
subst = {'logfile': where + '/pgbouncer.log', 'pidfile': where + '/pgbouncer.pid',
         'unix_socket_dir': where, 'auth_file': where + '/userlist.txt', 'listen_port': port}
def key(l):
    m = re.match(r'^\s*([\w.*-]+)\s*=', l)
    return m.group(1) if m else None
lines = [('%s = %s' % (key(l), subst[key(l)]) if key(l) in subst else l) for l in lines]
section = None
for l in open(page).read().split('\n'):
    if re.match(r'^\s*\[(\w+)\]\s*$', l):
        section = l.strip(); continue
    k = key(l)
    if not k:
        continue
    start = lines.index(section)  # the section's header in Debian's file
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith('[')), len(lines))
    hit = [i for i in range(start + 1, end) if key(lines[i]) == k]
    if hit:
        lines[hit[-1]] = l.strip()
    else:
        lines.insert(start + 1, l.strip())
print('\n'.join(lines))
PY
            ;;
        sh:*)
            substitute "$file" "$out/pgpass" > "$file.run"
            (cd "$out" && env PGHOST="$STORE" PGPORT="$SP" bash -e "$file.run") > "$file.out" 2>&1 || status=$? ;;
        *) status="a block this test does not know: $kind $arg" ;;
        esac
        check "$where: the $kind block runs without an error" 0 "$status"
        [ "$status" = 0 ] || tail -5 "$file.out" 2>/dev/null | sed 's/^/#   /'
    done <<<"$steps"
    if [ -f "$BOUNCER/pgbouncer.ini" ] && [ -z "$bouncer_pid" ]; then
        # systemctl restart pgbouncer: Debian's unit runs it as postgres with that file
        chown -R "$PG_USER" "$BOUNCER"; as_pg pgbouncer -d "$BOUNCER/pgbouncer.ini"
        wait_for 10 "PgBouncer's pid file" bash -c "[ -s '$BOUNCER/pgbouncer.pid' ] && echo t" >/dev/null || true
        bouncer_pid=$(cat "$BOUNCER/pgbouncer.pid" 2>/dev/null || true)
        # (a PgBouncer left on the port by an earlier run would answer in this one's place)
        check_true "PgBouncer started with the page's pgbouncer.ini (port $BP)" \
            "$([ -n "$bouncer_pid" ] && kill -0 "$bouncer_pid" 2>/dev/null && echo t || { tail -3 "$BOUNCER/pgbouncer.log" | sed 's/^/#   /' >&2; echo f; })"
    fi
    [ -n "$started" ] || start_instance
}
run_setup stores.md a 29662
check "stores.md: instance a holds a slot of orders in the store, under keeper_a" "held keeper_a" \
    "$(qstore -F' ' -c "SELECT l.state, x.owner_role FROM cosid_leases('orders') l
        JOIN cosid.lease x USING (namespace, slot) WHERE l.state = 'held'" 2>&1)"
check "stores.md: the instance's id is in its table, from namespace orders" 1 \
    "$(qa -c "SELECT count(*) FROM orders WHERE id BETWEEN cosid_min_id(now() - interval '1 hour', 'orders') AND cosid_max_id(now(), 'orders')" 2>&1)"
# docs/failover.md's on_role_change callback (the page's own block), as Patroni calls it (as
# postgres, with the action, the role and the scope), on a streaming standby of this server,
# which issued ids above: promoted, the standby's store is a fork until acknowledged. psql finds
# the standby through PGHOST and PGPORT (Patroni's user reaches its server on Debian's socket).
# Its keeper looks at its store 3 s after it starts (cosid.test_keeper_ready_delay, as on a
# loaded machine): the callback's acknowledgment must still cover the fork the keeper declares
# then (before the fix it came first, and the new primary stayed a fork).
FO="$(dirname "$DIR")/doc_blocks_standby"; FP=29665
rm -rf "$FO" "$DIR/failover"; mkdir -p "$FO" "$DIR/failover"; chown "$PG_USER" "$FO"
callback=$(python3 "$COSID_ROOT/test/meta/doc_blocks.py" --steps "$COSID_ROOT/docs/failover.md" "$DIR/failover" \
    | awk '$2 == "file" && $3 == "cosid-promoted" {print $1}')
chmod 755 "$callback"; chown -R "$PG_USER" "$DIR/failover"
as_pg "$PG_BIN/pg_basebackup" -h "$DIR" -p "$PORT" -D "$FO/data" -R -X stream -c fast >/dev/null  # (no slot: not node_standby)
node_attach fo "$FO" "$FP" "cosid.test_keeper_ready_delay = '3s'"
node_start fo
on_role_change() { as_pg env PATH="$PG_BIN:$PATH" PGHOST="$FO" PGPORT="$FP" "$callback" on_role_change "$1" doc; }
status=0; out=$(on_role_change replica 2>&1) || status=$?
check "failover.md's callback on a replica: does nothing, exits 0" "0 " "$status $out"
on_role_change primary > "$DIR/failover/callback.out" 2>&1 &
waiting=$!
# Patroni calls it as it asks for the promotion: the callback waits for its end
node_promote fo
status=0; wait "$waiting" || status=$?
check "failover.md's callback on the promoted standby exits 0" 0 "$status"
check_true "failover.md's callback acknowledged the fork (cosid_fork_acknowledge() answered)" \
    "$(grep -q 'fork acknowledged' "$DIR/failover/callback.out" && echo t || { sed 's/^/#   /' "$DIR/failover/callback.out" >&2; echo f; })"
check "the promoted standby issues after it (its keeper looked at the store after the acknowledgment was asked for)" t \
    "$(qfo -c "SET cosid.acquire_timeout = '10s'" -c "SELECT cosid_next() > 0" 2>&1)"
check "the promoted standby's fork check is ok after it" ok \
    "$(qfo -c "SELECT status FROM cosid_health() WHERE name = 'fork'" 2>&1)"
node_stop fo immediate
# the page's SQL on another promoted standby, a fork that nobody acknowledged yet
sqlblock=$(ls "$DIR"/failover/*.sql | head -1); chown "$PG_USER" "$sqlblock"
rm -rf "$FO"; mkdir -p "$FO"; chown "$PG_USER" "$FO"
as_pg "$PG_BIN/pg_basebackup" -h "$DIR" -p "$PORT" -D "$FO/data" -R -X stream -c fast >/dev/null
node_attach fo "$FO" "$FP"
node_start fo
node_promote fo
fork_critical() { [ "$(qfo -c "SELECT status FROM cosid_health() WHERE name = 'fork'")" = critical ] && echo t; }
check_true "failover.md: the promoted standby is a fork (its fork check critical)" "$(wait_for 10 "the fork declared" fork_critical)"
status=0; psql_at "$FO" "$FP" postgres -f "$sqlblock" > "$sqlblock.out" 2>&1 || status=$?
check "failover.md: its cosid_fork_acknowledge() block runs on the fork without an error" 0 "$status"
[ "$status" = 0 ] || tail -5 "$sqlblock.out" | sed 's/^/#   /'
node_stop fo immediate

# docs/static-slots.md's settings on a server of their own: every namespace on slot 7, the
# state file written before the first id
SS="$(dirname "$DIR")/doc_blocks_static"; SSP=29666
rm -rf "$DIR/static"; mkdir -p "$DIR/static"
# shellcheck disable=SC2178  # conf: a string here (a local array of that name in a function)
conf=$(python3 "$COSID_ROOT/test/meta/doc_blocks.py" --steps "$COSID_ROOT/docs/static-slots.md" "$DIR/static" \
    | awk '$2 == "conf" && $3 == "postgresql.conf" {print $1}')
# shellcheck disable=SC2128  # conf: a string here (a local array of that name in a function)
mapfile -t static_conf < <(grep -v '^ *#' "$conf" | grep .)
node_up ss "$SS" "$SSP" "${static_conf[@]}"
check "static-slots.md: its settings give slot 7 to every namespace" "7 7" \
    "$(qss -F' ' -c "CREATE EXTENSION cosid" -c "SELECT cosid_namespace_create('orders')" \
        -c "SELECT cosid_slot(cosid_next()), cosid_slot(cosid_next('orders'))" 2>&1 | tail -1)"
check_true "static-slots.md: the state file (cosid.state in the data directory) is written" \
    "$([ -s "$SS/data/cosid.state" ] && echo t || echo f)"
node_stop ss immediate

run_setup pooler.md b 29663
qb -c "CREATE EXTENSION cosid" >/dev/null
t0=$(now_ms)
check_true "pooler.md: instance b issues an id of namespace orders through PgBouncer" \
    "$(wait_for 30 "an id on instance b" qb -c "SELECT cosid_next('orders') > 0")"
echo "# pooler.md: instance b's first id $(( $(now_ms) - t0 )) ms after CREATE EXTENSION"
check "pooler.md: instance b holds a slot of orders in the store, under keeper_b" "held keeper_b" \
    "$(qstore -F' ' -c "SELECT l.state, x.owner_role FROM cosid_leases('orders') l
        JOIN cosid.lease x USING (namespace, slot) WHERE l.state = 'held' AND x.owner_role = 'keeper_b'" 2>&1)"
check "pooler.md: instance b's cosid.store_dsn names PgBouncer (port $BP), not the store" \
    "host=127.0.0.1 port=$BP dbname=store user=keeper_b" "$(qb -c "SHOW cosid.store_dsn" 2>&1)"
assert_store_verified "$DIR" "$PORT" postgres "the store the pages' blocks ran on"
exit $FAIL
