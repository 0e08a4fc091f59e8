#!/usr/bin/env bash
# The README's five-minute start as a reader runs it on Debian 12, with Debian's own cluster
# tools (pg_createcluster, pg_ctlcluster): step 1's preload line, step 2's SQL and step 3's
# second server leasing from the first through a password login.  The blocks come from the
# page itself (test/meta/doc_blocks.py --steps).  What the test changes, and nothing else:
# the clusters' names and ports (the page's `main` on 5432 is a new cluster here, its
# `second` on 5433 another one), so that the machine's own clusters stay untouched.
# Checks: each block runs without an error; the store shows both servers' slots held, the
# second's under its owner key (host:port); the ids of both servers are unique together.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
DIR="${1:-/tmp/cosid-e2e}/readme_start"
MAIN=cosid_readme_main; SECOND=cosid_readme_second; PM=56692; PS=56693
MAJOR=$(basename "$(dirname "$PG_BIN")")
# the two clusters as nodes m and s (qm, qs), for the checks: Debian's tools make and run them
# (their socket directory is Debian's, /var/run/postgresql; the blocks run as the page writes them)
node_register m /var/run/postgresql "$PM"; node_register s /var/run/postgresql "$PS"
command -v pg_createcluster >/dev/null || { echo "not ok - pg_createcluster (postgresql-common) is installed"; exit 1; }
drop() { local c; for c in $MAIN $SECOND; do pg_dropcluster --stop "$MAJOR" "$c" >/dev/null 2>&1 || true; done; }
drop
trap drop EXIT
rm -rf "$DIR"; mkdir -p "$DIR"
python3 "$COSID_ROOT/test/meta/doc_blocks.py" --steps "$COSID_ROOT/README.md" "$DIR/blocks" > "$DIR/blocks.txt"
check "README.md: the marked blocks are step 2's SQL and step 3's shell" "sql sh" "$(awk '{print $2}' "$DIR/blocks.txt" | paste -sd' ')"
# the page's `main` cluster: a new one with step 1's preload line (the machine's is left alone)
pg_createcluster "$MAJOR" "$MAIN" --port "$PM" >/dev/null
sed -n "s|/etc/postgresql/15/main/|/etc/postgresql/$MAJOR/$MAIN/|p" "$COSID_ROOT/README.md" | grep -E '^echo .*shared_preload_libraries' > "$DIR/step1.sh"
check "README.md: step 1's preload line found" 1 "$(wc -l < "$DIR/step1.sh")"
bash -e "$DIR/step1.sh"
pg_ctlcluster "$MAJOR" "$MAIN" start
sql=$(awk '$2 == "sql" {print $1}' "$DIR/blocks.txt")
status=0; runuser -u postgres -- psql -X -v ON_ERROR_STOP=1 -p "$PM" postgres -f "$sql" > "$DIR/step2.out" 2>&1 || status=$?
check "README.md step 2: its SQL runs without an error" 0 "$status"
[ "$status" = 0 ] || tail -5 "$DIR/step2.out" | sed 's/^/#   /'
sh=$(awk '$2 == "sh" {print $1}' "$DIR/blocks.txt")
sed -e "s/-p 5432/-p $PM/g; s/port=5432/port=$PM/g; s/--port 5433/--port $PS/g; s/-p 5433/-p $PS/g" \
    -e "s| 15 second| $MAJOR $SECOND|g; s|/etc/postgresql/15/second/|/etc/postgresql/$MAJOR/$SECOND/|g" "$sh" > "$DIR/step3.sh"
status=0; bash -e "$DIR/step3.sh" > "$DIR/step3.out" 2>&1 || status=$?
check "README.md step 3: the second server's block runs without an error" 0 "$status"
[ "$status" = 0 ] && grep -A4 'namespace | slot' "$DIR/step3.out" | sed 's/^/#   /' || tail -8 "$DIR/step3.out" | sed 's/^/#   /'
check_true "README.md step 3: the store shows the second server's slot held under its owner key (host:$PS)" \
    "$(grep -qE "^ default +\| +[0-9]+ \| [^|]+:$PS +\| held" "$DIR/step3.out" && echo t || echo f)"
check "both servers' ids: 100,000 + 1,000, none twice" "101000 101000" \
    "$( { qm -c "SELECT id FROM orders"; qs -c "SELECT id FROM orders"; } | sort | uniq | wc -l) $( { qm -c "SELECT id FROM orders"; qs -c "SELECT id FROM orders"; } | wc -l)"
check "the store: cosid_verify() finds no two overlapping windows" 0 "$(qm -c "SELECT count(*) FROM cosid_verify()")"
exit $FAIL
