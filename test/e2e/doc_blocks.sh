#!/usr/bin/env bash
# The docs' marked SQL blocks (<!-- doc-test: sql --> before the fence: test/meta/doc_blocks.py)
# run as a reader copies them, page after page in one database, against a server that
# preloads cosid with its default settings: each block runs without an error, and what a page
# shows of PostgreSQL's answers is what PostgreSQL prints (the plans and layouts of docs/ids.md,
# the version of docs/upgrades.md). Blocks marked skip (with their reason) do not run; pages with
# other kinds of blocks run in their own tests (check_docs.py checks that one does).
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
DIR="${1:-/tmp/cosid-e2e}/doc_blocks"; PORT=56660
trap 'stop_server "$DIR" immediate' EXIT
start_server "$DIR" "$PORT"
mkdir -p "$DIR/blocks"
pages=$(python3 "$COSID_ROOT/test/meta/doc_blocks.py" "$COSID_ROOT" "$DIR/blocks")
chown -R "$PG_USER" "$DIR/blocks"
check_true "marked blocks found in README.md and docs/ids.md" \
    "$(grep -q ' README.md ' <<<"$pages" && grep -q ' docs/ids.md ' <<<"$pages" && echo t || echo f)"
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
upgrades=$(ls "$DIR"/blocks/*-upgrades.sql.out 2>/dev/null | head -1)
shown=$(grep -oE "extname = 'cosid'; +-- [0-9.]+" "$COSID_ROOT/docs/upgrades.md" | grep -oE '[0-9.]+$' || true)
check "upgrades.md: extversion after ALTER EXTENSION cosid UPDATE is the version the page shows (and cosid.control's)" \
    "$shown $shown" "$(grep -oE '^ [0-9]+\.[0-9]+$' "$upgrades" | tr -d ' ' | tail -1) $(sed -nE "s/^default_version = '(.*)'/\1/p" "$COSID_ROOT/cosid.control")"

# docs/stores.md, its setup in page order (doc_blocks.py --steps) on two servers of this machine:
# the store and instance a. Each SQL block runs where its first line says ("-- on the store
# server", "-- on every instance"). What the test changes, and nothing else: the store's host
# and port (store.example:5432 is 127.0.0.1 and its port here), the instances' network in
# pg_hba.conf, and where the instance's .pgpass is (the instance starts with PGPASSFILE). The
# store authenticates as Debian's pg_hba.conf does on the socket; over TCP only the page's
# line lets anyone in.
STORE="$(dirname "$DIR")/doc_blocks_store"; SP=56661; INST="$(dirname "$DIR")/doc_blocks_instance"; IP=56662
trap 'stop_server "$DIR" immediate; stop_server "$INST" immediate; stop_server "$STORE" immediate' EXIT
start_server "$STORE" "$SP" "listen_addresses = '127.0.0.1'" "password_encryption = 'scram-sha-256'"
printf 'local   all             postgres                                peer\n' > "$STORE/data/pg_hba.conf"
as_pg "$PG_BIN/pg_ctl" -D "$STORE/data" reload >/dev/null
rm -rf "$DIR/stores"; mkdir -p "$DIR/stores"
steps=$(python3 "$COSID_ROOT/test/meta/doc_blocks.py" --steps "$COSID_ROOT/docs/stores.md" "$DIR/stores")
chown -R "$PG_USER" "$DIR/stores"
substitute() {
    sed -e "s/store\.example:5432:/127.0.0.1:$SP:/g" -e "s/host=store\.example port=5432/host=127.0.0.1 port=$SP/g" \
        -e "s|10\.0\.0\.0/24|127.0.0.1/32|g" -e "s|~postgres/\.pgpass|$DIR/stores/pgpass|g" "$1"
}
instance_conf=()
while read -r file kind arg line; do
    [ -n "$file" ] || continue
    where="stores.md:$line"; status=0
    case "$kind:$arg:$(head -1 "$file")" in
    "sql:-:-- on the store server")
        psql_at "$STORE" "$SP" postgres -f "$file" > "$file.out" 2>&1 || status=$? ;;
    "sql:-:-- on every instance")
        # the instance, with the page's settings (restarted: started now, as the page's order allows)
        PGPASSFILE="$DIR/stores/pgpass" start_server "$INST" "$IP" "${instance_conf[@]}"
        psql_at "$INST" "$IP" postgres -f "$file" > "$file.out" 2>&1 || status=$? ;;
    conf:pg_hba.conf:*)
        substitute "$file" >> "$STORE/data/pg_hba.conf"
        psql_at "$STORE" "$SP" postgres -qc "SELECT pg_reload_conf()" > "$file.out" 2>&1 || status=$? ;;
    conf:postgresql.conf:*)
        mapfile -t instance_conf < <(substitute "$file" | grep -v '^ *#') ;;
    sh:*)
        substitute "$file" > "$file.run"
        (cd "$DIR/stores" && bash -e "$file.run") > "$file.out" 2>&1 || status=$? ;;
    *) status="a block this test does not know: $kind $arg" ;;
    esac
    check "$where: the $kind block runs without an error" 0 "$status"
    [ "$status" = 0 ] || tail -5 "$file.out" 2>/dev/null | sed 's/^/#   /'
done <<<"$steps"
check "stores.md: instance a holds a slot of orders in the store, under keeper_a" "held keeper_a" \
    "$(psql_at "$STORE" "$SP" postgres -At -F' ' -c "SELECT l.state, x.owner_role FROM cosid_leases('orders') l
        JOIN cosid.lease x USING (namespace, slot) WHERE l.state = 'held'" 2>&1)"
check "stores.md: the instance's id is in its table, from namespace orders" 1 \
    "$(psql_at "$INST" "$IP" postgres -At -c "SELECT count(*) FROM orders WHERE id BETWEEN cosid_min_id(now() - interval '1 hour', 'orders') AND cosid_max_id(now(), 'orders')" 2>&1)"
exit $FAIL
