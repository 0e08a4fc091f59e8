#!/usr/bin/env bash
# Every test of cosid: GoogleTest on the core, pg_regress and isolation specs against
# temporary instances that preload cosid, then the end-to-end scripts under test/e2e.
# Run as root on a fresh Debian 12 machine; it installs what it needs.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

install_prerequisites
build_and_install
work="$(mktemp -d /tmp/cosid-test.XXXXXX)"
trap 'rm -rf "$work"' EXIT

total_passed=0
total_failed=0
count_line() {  # count_line LOGFILE: adds what a runner's summary says to the totals
    local p f
    p=$(grep -oE '^\[  PASSED  \] [0-9]+' "$1" | grep -oE '[0-9]+$' | tail -1 || true)
    f=$(grep -oE '^\[  FAILED  \] [0-9]+ test' "$1" | grep -oE '[0-9]+' | tail -1 || true)
    total_passed=$((total_passed + ${p:-0})); total_failed=$((total_failed + ${f:-0}))
}

log "GoogleTest: the pure C++ core"
make -C "$COSID_ROOT" -s test/unit/run_unit
unit_status=0
"$COSID_ROOT/test/unit/run_unit" > "$work/unit.log" 2>&1 || unit_status=$?
grep -E '^\[ +(OK|FAILED|PASSED) +\]|^\[==========\]|Failure|Expected|Which is' "$work/unit.log" || true
count_line "$work/unit.log"
[ "$unit_status" = 0 ] || { echo "unit: $total_passed passed, $total_failed failed"; exit 1; }

# pg_regress and initdb refuse root: run them as postgres in a copy of the tree.
cp -r "$COSID_ROOT/Makefile" "$COSID_ROOT/cosid.control" "$COSID_ROOT/sql" "$COSID_ROOT/expected" \
      "$COSID_ROOT/test" "$COSID_ROOT/src" "$work/"
chown -R "$PG_USER" "$work"

log "pg_regress and isolation specs"
started=$SECONDS
if ! as_pg make -C "$work" -s installcheck 2>&1 | tee "$work/installcheck.log"; then
    for f in "$work"/test/out/regression.diffs "$work"/test/out_isolation/regression.diffs; do
        [ -f "$f" ] && cat "$f"
    done
    echo "pg_regress: $(grep -cE '\.\.\. ok' "$work/installcheck.log") passed, $(grep -cE '\.\.\. FAILED' "$work/installcheck.log") failed"
    exit 1
fi
total_passed=$((total_passed + $(grep -cE '\.\.\. ok' "$work/installcheck.log")))
echo "# pg_regress and isolation took $((SECONDS - started)) s"

status=0
passed=0
failed=0
for t in "$COSID_ROOT"/test/e2e/*.sh; do
    [ -e "$t" ] || continue
    log "end-to-end: $(basename "$t")"
    started=$SECONDS
    if bash "$t" "$work/e2e"; then passed=$((passed + 1)); else failed=$((failed + 1)); status=1; fi
    echo "# $(basename "$t") took $((SECONDS - started)) s"
done
echo
echo "e2e: $passed passed, $failed failed"
total_passed=$((total_passed + passed)); total_failed=$((total_failed + failed))
echo "total: $total_passed passed, $total_failed failed"
exit $status
