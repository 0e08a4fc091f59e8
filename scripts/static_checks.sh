#!/usr/bin/env bash
# The checks that need no server, each with a finding count of zero:
#   - shellcheck on every shell script of the tree (scripts/lint_shell.sh);
#   - cppcheck on the C++ that has no PostgreSQL in it (src/core, test/model);
#   - clang-tidy on all of src/, with PostgreSQL's headers (.clang-tidy says which checks);
#   - clang-format --dry-run --Werror on the C++ of src/, test/unit and test/model (.clang-format);
#   - no include cycle between the modules of src/ (scripts/include_cycles.py);
#   - no function in src/ longer than 80 lines, signature to closing brace (scripts/long_functions.py);
#   - the unit tests, and the model checker to smaller bounds than the test command's, built
#     with AddressSanitizer and UndefinedBehaviorSanitizer (the first report stops the run).
# (src/pg is also compiled with -Wall -Wextra -Werror against every major; cppcheck with
# PostgreSQL's headers takes longer than the whole test command, clang-tidy about 40 CPU-s.)
#
#   bash scripts/static_checks.sh        prints "ok - ..." / "not ok - ..."; non-zero on a finding
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
set +e
cd "$COSID_ROOT" || exit 1
failed=0
say() {  # say OK|FAIL TEXT [LOG]: one result line, and the log's last lines under a failure
    if [ "$1" = OK ]; then echo "ok - $2"; else
        echo "not ok - $2"; failed=$((failed + 1))
        [ -n "${3:-}" ] && tail -30 "$3" | sed 's/^/#   /'
    fi
}
work=$(mktemp -d /tmp/cosid-static.XXXXXX)
trap 'rm -rf "$work"' EXIT

started=$SECONDS
bash scripts/lint_shell.sh > "$work/shellcheck.log" 2>&1
grep -E '^(ok|not ok)' "$work/shellcheck.log" | head -1 | sed 's/^/# /'
[ "$(grep -c '^not ok' "$work/shellcheck.log")" = 0 ] && grep -q '^ok' "$work/shellcheck.log" &&
    say OK "shellcheck: no finding" || say FAIL "shellcheck" "$work/shellcheck.log"

cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability --std=c++17 --language=c++ \
    --inline-suppr -I src/core src/core test/model > "$work/cppcheck.log" 2>&1
[ $? = 0 ] && [ ! -s "$work/cppcheck.log" ] && say OK "cppcheck src/core test/model: no finding" ||
    say FAIL "cppcheck src/core test/model" "$work/cppcheck.log"

# clang-tidy on every source of src/ (the headers of src/ through them), two at a time, against
# the PostgreSQL the tree is built for.  A finding is a "warning:" line.
mapfile -t tidy_files < <(find src -name '*.cpp' | sort)
pg_server=$(pg_config --includedir-server); pg_inc=$(pg_config --includedir)
printf '%s\n' "${tidy_files[@]}" | nice xargs -P2 -I{} clang-tidy -quiet {} -- -std=c++17 -Isrc/core -Isrc/pg \
    -isystem "$pg_server" -isystem "$pg_inc" > "$work/clang-tidy.log" 2>/dev/null
n=$(grep -c 'warning:' "$work/clang-tidy.log")
[ "$n" = 0 ] && [ "${#tidy_files[@]}" -gt 0 ] && say OK "clang-tidy on ${#tidy_files[@]} sources of src/: no finding" ||
    say FAIL "clang-tidy: $n findings" "$work/clang-tidy.log"

# The C++ as .clang-format has it: a finding is a line clang-format would change.
mapfile -t cxx_files < <(find src \( -name '*.cpp' -o -name '*.hpp' \) -print; ls test/unit/*.cpp test/model/*.cpp)
clang-format --dry-run --Werror "${cxx_files[@]}" > "$work/clang-format.log" 2>&1
n=$(grep -c 'warning:' "$work/clang-format.log")
[ "$n" = 0 ] && [ "${#cxx_files[@]}" -gt 0 ] && say OK "clang-format on ${#cxx_files[@]} files: no finding" ||
    say FAIL "clang-format: $n findings in ${#cxx_files[@]} files" "$work/clang-format.log"

# Layers that point one way: no module of src/ (x.hpp and x.cpp) reaches itself by includes.
python3 scripts/include_cycles.py -I src/core src > "$work/cycles.log" 2>&1
rc=$?
n=$(grep -c ' -> ' "$work/cycles.log")
[ "$rc" = 0 ] && [ "$n" = 0 ] && say OK "include cycles in src/: none" ||
    say FAIL "include cycles in src/: $n" "$work/cycles.log"

# Short functions: none in src/ over 80 lines (the longest are printed).
python3 scripts/long_functions.py --max 80 src > "$work/long_functions.log" 2>&1
rc=$?
n=$(grep -c ' lines$' "$work/long_functions.log")
longest=$(python3 scripts/long_functions.py --all src 2>/dev/null | head -1 | sed 's/^.*: \([^:]*\): \([0-9]*\) lines$/\1, \2 lines/')
[ "$rc" = 0 ] && [ "$n" = 0 ] && say OK "functions in src/ over 80 lines: none (the longest: $longest)" ||
    say FAIL "functions in src/ over 80 lines: $n" "$work/long_functions.log"

export "${SAN_ENV[@]}"  # the sanitizers' settings (scripts/lib.sh)
if make -s test/unit/run_unit_san > "$work/build_unit.log" 2>&1; then
    test/unit/run_unit_san > "$work/unit.log" 2>&1
    rc=$?
    n=$(grep -oE '^\[  PASSED  \] [0-9]+' "$work/unit.log" | grep -oE '[0-9]+$')
    [ "$rc" = 0 ] && ! grep -qE 'runtime error|AddressSanitizer|LeakSanitizer' "$work/unit.log" &&
        say OK "unit tests under ASan and UBSan (${n:-0} tests)" || say FAIL "unit tests under ASan and UBSan" "$work/unit.log"
else
    say FAIL "build of the unit tests with ASan and UBSan" "$work/build_unit.log"
fi

# The model checker to a depth or two less than model_checks.sh's bounds: every move family
# runs, and each bound takes seconds under the sanitizers.
BOUNDS=(
  "--depth 4"
  "--central --depth 4"
  "--issuers 1 --only core,crash,restart,clock,fork --depth 6"
  "--issuers 1 --static-start --only core,crash,restart,clock,static --depth 6"
  "--central --only core,failover,restore,limits --depth 5"
  "--issuers 1 --only core,restart,fork,databases --depth 5"
  "--central --issuers 1 --only core,loss,crash,tenants --depth 6"
)
if make -s test/model/run_model_san > "$work/build_model.log" 2>&1; then
    for b in "${BOUNDS[@]}"; do
        # shellcheck disable=SC2086  # the bound's arguments, one word each
        test/model/run_model_san $b > "$work/model.log" 2>&1
        rc=$?
        [ "$rc" = 0 ] && grep -q '^result: no violation' "$work/model.log" &&
            ! grep -qE 'runtime error|AddressSanitizer|LeakSanitizer' "$work/model.log" &&
            say OK "model checker under ASan and UBSan: $b ($(grep -oE '[0-9]+ distinct states' "$work/model.log" | tail -1))" ||
            say FAIL "model checker under ASan and UBSan: $b" "$work/model.log"
    done
else
    say FAIL "build of the model checker with ASan and UBSan" "$work/build_model.log"
fi
echo "# static checks and sanitizers took $((SECONDS - started)) s"
[ "$failed" = 0 ]
