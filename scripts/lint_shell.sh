#!/usr/bin/env bash
# Runs shellcheck -S warning over every shell script git tracks: *.sh, .ci/run and any other file
# whose first line is a sh/bash/dash/ksh shebang.  One shellcheck run over all of them, with
# -x (sourced files followed: their paths relative to the sourcing script, or to the
# repository root).  Prints "ok - shellcheck: N scripts, no finding", or
# "not ok - shellcheck: M findings" and each finding as a "# " line; exits 1 on a finding.
#   bash scripts/lint_shell.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export LC_ALL=C

if ! command -v shellcheck >/dev/null; then
    echo "not ok - shellcheck: not installed (apt-get install shellcheck)"; exit 2
fi

scripts=()
while IFS= read -r -d '' f; do
    [ -f "$f" ] || continue  # tracked but deleted in the working tree
    case $f in
        *.sh|.ci/run) scripts+=("$f") ;;
        *) first=""; IFS= read -r -n 200 first < "$f" 2>/dev/null || true
           [[ $first =~ ^\#!.*[/[:space:]](sh|bash|dash|ksh)([[:space:]]|$) ]] && scripts+=("$f") ;;
    esac
done < <(git ls-files -z)

rc=0
out=$(shellcheck -S warning -x -P SCRIPTDIR -P . -f gcc -- "${scripts[@]}" 2>&1) || rc=$?
findings=$(grep -E '^[^:]+:[0-9]+:[0-9]+: ' <<<"$out" | sort -u || true)
if [ "$rc" = 0 ] && [ -z "$out" ]; then
    echo "ok - shellcheck: ${#scripts[@]} scripts, no finding"
elif [ "$rc" = 1 ] && [ -n "$findings" ]; then
    echo "not ok - shellcheck: $(wc -l <<<"$findings") findings"
    sed 's/^/# /' <<<"$findings"
    exit 1
else  # the shellcheck run failed (an unreadable file, a bad option)
    echo "not ok - shellcheck: exit status $rc"
    sed 's/^/# /' <<<"$out"
    exit 1
fi
