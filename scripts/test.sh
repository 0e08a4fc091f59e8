#!/usr/bin/env bash
# Every test of cosid: GoogleTest on the core, pg_regress and isolation specs against
# temporary instances that preload cosid, then the end-to-end scripts under test/e2e.
# Run as root on a fresh Debian 12 machine; it installs what it needs.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

install_prerequisites
build_and_install

log "GoogleTest: the pure C++ core"
make -C "$COSID_ROOT" -s unit

# pg_regress and initdb refuse root: run them as postgres in a copy of the tree.
work="$(mktemp -d /tmp/cosid-test.XXXXXX)"
trap 'rm -rf "$work"' EXIT
cp -r "$COSID_ROOT/Makefile" "$COSID_ROOT/cosid.control" "$COSID_ROOT/sql" "$COSID_ROOT/expected" \
      "$COSID_ROOT/test" "$COSID_ROOT/src" "$work/"
chown -R "$PG_USER" "$work"

log "pg_regress and isolation specs"
if ! as_pg make -C "$work" -s installcheck; then
    for f in "$work"/test/out/regression.diffs "$work"/test/out_isolation/regression.diffs; do
        [ -f "$f" ] && cat "$f"
    done
    exit 1
fi

status=0
passed=0
failed=0
for t in "$COSID_ROOT"/test/e2e/*.sh; do
    [ -e "$t" ] || continue
    log "end-to-end: $(basename "$t")"
    if bash "$t" "$work/e2e"; then passed=$((passed + 1)); else failed=$((failed + 1)); status=1; fi
done
echo
echo "end-to-end: $passed passed, $failed failed"
exit $status
