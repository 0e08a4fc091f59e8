#!/usr/bin/env bash
# The suite on the PostgreSQL majors other than Debian's 15, from the builds of the official
# releases in ../shared/pg (their README says how they were made; Debian 12 has only 15).
# For each major: cosid is built against it with -Wall -Wextra -Werror and installed into its
# prefix, then pg_regress and the isolation specs run on it, and three end-to-end scripts:
# concurrency.sh (many clients, zero duplicates), no_preload.sh (calls without the library
# preloaded, a missing database, a hot standby) and faults_process.sh (kill -9, SIGSTOP).
#
#   bash scripts/majors.sh WORKDIR [MAJOR...]     (default: every major found)
#
# Then, with every major (no MAJOR given), test/e2e/pg_upgrade.sh: pg_upgrade between majors.
#
# Prints one line per major and ends with "majors: P passed, F failed"; exits non-zero when
# anything failed.  Without ../shared/pg it says so in one line and runs pg_upgrade.sh alone
# (which then upgrades 15 -> 15).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
set +e  # one major's failure is counted and reported, never the end of the others
SHARED_PG="${COSID_SHARED_PG:-$COSID_ROOT/../shared/pg}"
work="$1"; shift
majors=("$@")
all_majors=$([ "$#" = 0 ] && echo 1)
if [ "${#majors[@]}" = 0 ]; then
    for f in "$SHARED_PG"/pg-*-bookworm-x86_64.tar.gz; do
        [ -e "$f" ] && majors+=("$(basename "$f" | cut -d- -f2)")
    done
fi
passed=0; failed=0

# pg_upgrade.sh needs two majors with this tree's cosid at once (15's is installed by
# scripts/test.sh before this lane starts, the others by the loop below), so it runs here, at
# the end of this background lane, once every major is built and installed, rather than in
# the 15 lane (which would have to wait for this one) or after both lanes (which would add
# its 60-100 s to every run): here it lengthens the test command only when this lane ends after
# the 15 suite.
run_pg_upgrade() {
    local started=$SECONDS log="$work/pg_upgrade.log"
    mkdir -p "$work"
    if bash "$COSID_ROOT/test/e2e/pg_upgrade.sh" "$work/e2e-upgrade" > "$log" 2>&1; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        { grep -E '^not ok' "$log" || true; tail -8 "$log"; } | sed "s/^/#   pg_upgrade.sh: /"
    fi
    grep -E '^# (skipped|so |no builds|first id)' "$log" | sed "s/^# /#   pg_upgrade.sh: /"
    echo "pg_upgrade.sh: $(grep -c '^ok' "$log") ok, $(grep -c '^not ok' "$log") not ok in $((SECONDS - started)) s"
}

if [ "${#majors[@]}" = 0 ]; then
    echo "majors: no builds of other PostgreSQL majors in $SHARED_PG: only Debian's 15 is tested"
    run_pg_upgrade
    echo "majors: $passed passed, $failed failed"
    [ "$failed" = 0 ]; exit
fi
E2E=(concurrency.sh no_preload.sh faults_process.sh)
for v in "${majors[@]}"; do
    started=$SECONDS
    prefix="/opt/pg/$v"  # compiled into the builds (see their README)
    if [ ! -x "$prefix/bin/pg_config" ]; then
        mkdir -p /opt/pg
        tar -C /opt/pg -xzf "$SHARED_PG/pg-$v-bookworm-x86_64.tar.gz"
    fi
    b="$work/pg$v"
    rm -rf "$b"; mkdir -p "$b"
    cp -r "$COSID_ROOT/Makefile" "$COSID_ROOT/cosid.control" "$COSID_ROOT/sql" \
          "$COSID_ROOT/test" "$COSID_ROOT/src" "$COSID_ROOT/scripts" "$b/"
    find "$b/src" "$b/test" -name '*.o' -delete
    rm -f "$b/test/unit/run_unit" "$b/test/model/model_compare" "$b/test/model/run_model"
    p=0; f=0; what=""
    # (niced: the 15 suite runs beside, with its timings)
    if ! nice -n 10 make -C "$b" -s -j2 COSID_WERROR=1 PG_CONFIG="$prefix/bin/pg_config" > "$b/build.log" 2>&1 ||
       ! make -C "$b" -s install PG_CONFIG="$prefix/bin/pg_config" >> "$b/build.log" 2>&1; then
        sed "s/^/#   pg$v: /" "$b/build.log" | tail -40
        echo "major $v: build with -Werror FAILED"
        failed=$((failed + 1)); continue
    fi
    p=$((p + 1)); what="build"
    chown -R "$PG_USER" "$b"
    if cpu_run "$b/installcheck.cpu" as_pg make -C "$b" -s installcheck PG_CONFIG="$prefix/bin/pg_config" > "$b/installcheck.log" 2>&1; then :; else
        for d in "$b"/test/out/regression.diffs "$b"/test/out_isolation/regression.diffs; do
            [ -f "$d" ] && sed "s/^/#   pg$v: /" "$d" | head -60
        done
    fi
    ok=$(grep -cE '\.\.\. ok|^ok [0-9]+ ' "$b/installcheck.log" || true)
    bad=$(grep -cE '\.\.\. FAILED|^not ok [0-9]+ ' "$b/installcheck.log" || true)
    p=$((p + ok)); f=$((f + bad)); what="$what, $ok pg_regress/isolation"
    [ "$ok" -gt 0 ] || { f=$((f + 1)); echo "#   pg$v: pg_regress ran nothing"; tail -20 "$b/installcheck.log"; }
    for t in "${E2E[@]}"; do
        if COSID_PG_BIN="$prefix/bin" cpu_run "$b/$t.cpu" bash "$b/test/e2e/$t" "$work/e2e-$v" > "$b/$t.log" 2>&1; then
            p=$((p + 1))
        else
            f=$((f + 1))  # (a script that died prints no "not ok": its last lines tell)
            { grep -E '^not ok' "$b/$t.log" || true; tail -8 "$b/$t.log"; } | sed "s/^/#   pg$v $t: /"
        fi
    done
    what="$what, ${E2E[*]}; CPU-s: installcheck $(cat "$b/installcheck.cpu")"
    for t in "${E2E[@]}"; do what="$what $t $(cat "$b/$t.cpu" 2>/dev/null)"; done
    echo "major $v ($("$prefix/bin/pg_config" --version)): $p passed, $f failed in $((SECONDS - started)) s ($what)"
    passed=$((passed + p)); failed=$((failed + f))
done
if [ -n "$all_majors" ]; then run_pg_upgrade; fi
echo "majors: $passed passed, $failed failed"
[ "$failed" = 0 ]
