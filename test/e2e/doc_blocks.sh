#!/usr/bin/env bash
# The docs' marked SQL blocks (<!-- doc-test: sql --> before the fence: test/meta/doc_blocks.py)
# run as a reader copies them, page after page in one database, against a server that
# preloads cosid with its default settings: each block runs without an error, and what a page
# shows of PostgreSQL's answers is what PostgreSQL prints (the plans of docs/ids.md).
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
assert_store_verified "$DIR" "$PORT" postgres "the store the pages' blocks ran on"
exit $FAIL
