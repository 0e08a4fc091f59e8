#!/usr/bin/env bash
# Every test of cosid: GoogleTest on the core and the model checker, then, side by side,
# pg_regress and isolation specs against temporary instances that preload cosid, and the
# end-to-end scripts under test/e2e in four lanes, on Debian's PostgreSQL 15; and, beside them,
# the other majors in ../shared/pg (scripts/majors.sh), and, niced, the Debian package and the
# static checks.  11 to 12 minutes on an idle 2-core machine.
# Run as root on a fresh Debian 12 machine; it installs what it needs.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

stage() { log "$* [at $SECONDS s]"; }  # a phase's heading, with the time since the start
install_prerequisites  # what the build needs
work="$(mktemp -d /tmp/cosid-test.XXXXXX)"
kill_tree() { local c; for c in $(pgrep -P "$1" || true); do kill_tree "$c"; done; kill "$1" 2>/dev/null || true; }
# (an early exit ends what runs in the background)
trap 'for p in ${apt_pid:-} ${regress_pid:-} ${package_pid:-} ${majors_pid:-} ${static_pid:-}; do kill -CONT -- "-$p" 2>/dev/null || true; kill_tree "$p"; done; rm -rf "$work"' EXIT
# bg_niced NICE CMD...: CMD in the background, in a session of its own (a process group to stop
# or end) whose scheduling group is niced.  Linux's autogroup gives every session an equal share
# of the CPU whatever the nice of its processes, so a plain `nice` of a new session is ignored:
# the background builds took half the machine from the model checker (132 s instead of 73).
bg_niced() {
    setsid bash -c 'echo "$1" > /proc/self/autogroup 2>/dev/null || true; shift; exec nice -n 19 "$@"' _ "$@" &
}
# What only the end-to-end lanes and the static checks use is installed in the background,
# niced, while the tree is built and the model checker runs (one apt-get update for all of it);
# the lanes wait for it.  The scripts install what is missing themselves when run alone, which
# in the lanes would make them wait for each other's apt.
#   postgresql-15-partman: test/e2e/partman.sh (daily partitions of a cosid column)
#   bash-builtins: test/lib/check.sh (sleep as a builtin in the scripts' loops)
#   the linters (shellcheck, cppcheck, clang-format, clang-tidy): scripts/static_checks.sh
#   python3-sqlalchemy ... ruby-pg, nodejs npm: test/e2e/applications.sh, the frameworks of
#     docs/applications.md (npm comes with NodeSource's nodejs, which Debian's npm package
#     would conflict with: only when there is no npm at all)
#   patroni ... python3-yaml: patroni.sh, prometheus.sh, health.sh (pgbouncer is a prerequisite)
# ($work/apt.rc says it is done: the static checks wait for it too)
bg_niced 10 bash -c 'source "$1/scripts/lib.sh"; set +e; rc_file=$2; shift 2; apt_install_missing "$@"; rc=$?
    command -v npm >/dev/null || apt_install_missing nodejs npm || rc=1
    echo "$rc" > "$rc_file"; exit "$rc"' _ "$COSID_ROOT" "$work/apt.rc" \
    postgresql-15-partman bash-builtins shellcheck cppcheck clang-format clang-tidy \
    python3-sqlalchemy python3-psycopg2 python3-django ruby-activerecord ruby-pg \
    patroni etcd-server curl prometheus prometheus-postgres-exporter python3-yaml > "$work/apt.log" 2>&1
apt_pid=$!
build_and_install COSID_WERROR=1  # a warning fails the test command
# Citus's build (test/lib/citus.sh: citus.sh says why when there is none)
# shellcheck source=test/lib/citus.sh
source "$COSID_ROOT/test/lib/citus.sh"
citus_install || true

total_passed=0
total_failed=0
count_line() {  # count_line LOGFILE: adds what a runner's summary says to the totals
    local p f
    p=$(grep -oE '^\[  PASSED  \] [0-9]+' "$1" | grep -oE '[0-9]+$' | tail -1 || true)
    f=$(grep -oE '^\[  FAILED  \] [0-9]+ test' "$1" | grep -oE '[0-9]+' | tail -1 || true)
    total_passed=$((total_passed + ${p:-0})); total_failed=$((total_failed + ${f:-0}))
}

stage "GoogleTest: the pure C++ core, under ASan and UBSan"
# The unit tests are built once, with AddressSanitizer and UndefinedBehaviorSanitizer (an
# object per source), and the model checker beside them (one g++ command): make -j2 -k on both
# cores.  Then make again for the unit tests alone: nothing to do, or their build's error,
# which ends the run (the model checker's: test/model/model_checks.sh makes it again and
# reports it).  scripts/static_checks.sh finds the unit tests made and runs them again.
make -C "$COSID_ROOT" -s -k -j2 test/unit/run_unit_san test/model/run_model COSID_WERROR=1 > "$work/gtest_build.log" 2>&1 || true
make -C "$COSID_ROOT" -s test/unit/run_unit_san || { echo "not ok - the unit tests' build"; exit 1; }
# Then, in the background, the Debian package (scripts/package.sh), and the static checks
# and sanitizers (scripts/static_checks.sh: shellcheck, cppcheck, clang-tidy, clang-format, the
# unit tests again and the model checker to smaller bounds under ASan and UBSan), which build
# the model checker with the sanitizers first and run the linters once they are installed.
# Both with bg_niced (above), at 19: they take what the model checker and the end-to-end lanes
# leave of the CPU, not their time, and are waited for after the lanes.
bg_niced 19 bash -c 'make -C "$1" -s test/model/run_model_san > "$2/san_build.log" 2>&1
    for _ in $(seq 1 1800); do [ -e "$2/apt.rc" ] && break; sleep 1; done
    exec bash "$1/scripts/static_checks.sh"' _ "$COSID_ROOT" "$work" > "$work/static.log" 2>&1
static_pid=$!
package_started=$SECONDS
bg_niced 19 bash -c 'rc=0; bash "$1/scripts/package.sh" "$2/deb" > "$2/package.log" 2>&1 || rc=$?
    echo "$rc" > "$2/package.rc"; echo "# the package was built in $((SECONDS)) s" > "$2/package.times"' _ "$COSID_ROOT" "$work"
package_pid=$!
unit_status=0
env "${SAN_ENV[@]}" "$COSID_ROOT/test/unit/run_unit_san" > "$work/unit.log" 2>&1 || unit_status=$?  # (scripts/lib.sh)
grep -E '^\[ +(OK|FAILED|PASSED) +\]|^\[==========\]|Failure|Expected|Which is|runtime error|Sanitizer' "$work/unit.log" || true
count_line "$work/unit.log"
[ "$unit_status" = 0 ] || { echo "unit: $total_passed passed, $total_failed failed"; exit 1; }

# The exhaustive model checker over the same core (docs/safety.md): its bounds with every rule
# on, then each rule switched off and the violation it closes reached (about a minute of the
# machine; no server).  It runs before anything else starts but the builds niced to 19 above,
# so that its time is its own: the promise is that it checks its bound within 3 minutes on 2
# cores.  Its result is counted after the lanes, with the others.
stage "the model checker (every interleaving of the operations to a bound, and its teeth), beside niced builds only"
model_started=$SECONDS
bash "$COSID_ROOT/test/model/model_checks.sh" "$COSID_ROOT" > "$work/model.log" 2>&1 \
    || grep -q '^not ok' "$work/model.log" || echo "not ok - model_checks.sh ran" >> "$work/model.log"
echo "# the model checker ran in $((SECONDS - model_started)) s (alone but for niced builds)"
echo 10 > "/proc/$package_pid/autogroup" 2>/dev/null || true  # (bg_niced above says why not renice)

# Everything else that needs only the build starts now, in the background, beside the checks
# of the docs and the end-to-end lanes below; each result is counted after the lanes.

# pg_regress and the isolation specs (temporary instances on sockets of their own).  pg_regress
# and initdb refuse root: they run as postgres in a copy of the tree.
cp -r "$COSID_ROOT/Makefile" "$COSID_ROOT/cosid.control" "$COSID_ROOT/sql" \
      "$COSID_ROOT/test" "$COSID_ROOT/src" "$work/"
chown -R "$PG_USER" "$work"
stage "in the background: pg_regress and isolation specs"
regress_started=$SECONDS
{
    rc=0; as_pg make -C "$work" -s installcheck > "$work/installcheck.log" 2>&1 || rc=$?
    echo "$rc" > "$work/installcheck.rc"
    echo "# pg_regress and isolation took $((SECONDS - regress_started)) s" >> "$work/installcheck.log"
} &
regress_pid=$!

# The other PostgreSQL majors (../shared/pg), each in its own build tree, servers and sockets
# (scripts/majors.sh): in two lanes of their own (every other major), then pg_upgrade between
# majors (test/e2e/pg_upgrade.sh; 15 -> 15 without ../shared/pg) once both have installed
# theirs.  The Debian package is built beside them, niced (it is installed and tried after the
# suites).
stage "in the background: PostgreSQL 16 to 19 in two lanes (scripts/majors.sh), then pg_upgrade (the Debian package is being built since $package_started s)"
majors_started=$SECONDS
SHARED_PG="${COSID_SHARED_PG:-$COSID_ROOT/../shared/pg}"
found_majors=()
for f in "$SHARED_PG"/pg-*-bookworm-x86_64.tar.gz; do
    [ -e "$f" ] && found_majors+=("$(basename "$f" | cut -d- -f2)")
done
{
    set +e; rc=0  # (a failure is counted and reported, never the end of this lane)
    if [ "${#found_majors[@]}" -lt 2 ]; then
        bash "$COSID_ROOT/scripts/majors.sh" "$work/majors" > "$work/majors.log" 2>&1 || rc=$?
    else
        # (majors.sh runs pg_upgrade.sh itself only when it is given no major)
        halves=("" "")
        for i in "${!found_majors[@]}"; do halves[$((i % 2))]+=" ${found_majors[$i]}"; done
        pids=()
        for h in 0 1; do
            # shellcheck disable=SC2086
            bash "$COSID_ROOT/scripts/majors.sh" "$work/majors" ${halves[$h]} > "$work/majors$h.log" 2>&1 & pids+=($!)
        done
        for p in "${pids[@]}"; do wait "$p" || rc=1; done
        echo "# the majors' two lanes ended $((SECONDS - majors_started)) s after they started" > "$work/majors.times"
        started=$SECONDS
        if bash "$COSID_ROOT/test/e2e/pg_upgrade.sh" "$work/majors/e2e-upgrade" > "$work/majors/pg_upgrade.log" 2>&1; then
            up=1; down=0
        else
            up=0; down=1; rc=1
        fi
        {
            grep -hv '^majors: ' "$work/majors0.log" "$work/majors1.log"
            [ "$down" = 0 ] || { grep -E '^not ok' "$work/majors/pg_upgrade.log" || true; tail -8 "$work/majors/pg_upgrade.log"; } |
                sed "s/^/#   pg_upgrade.sh: /"
            grep -E '^# (skipped|so |no builds|first id)' "$work/majors/pg_upgrade.log" | sed "s/^# /#   pg_upgrade.sh: /"
            echo "pg_upgrade.sh: $(grep -c '^ok' "$work/majors/pg_upgrade.log") ok, $(grep -c '^not ok' "$work/majors/pg_upgrade.log") not ok in $((SECONDS - started)) s"
            awk -v up="$up" -v down="$down" '  # a half that did not finish counts as one failure
                FNR == 1 { files++ }
                /^majors: [0-9]+ passed, [0-9]+ failed/ { p += $2; f += $4; done++ }
                END { printf "majors: %d passed, %d failed\n", p + up, f + down + files - done }' \
                "$work/majors0.log" "$work/majors1.log"
        } > "$work/majors.log" 2>&1
    fi
    echo "# the majors' lane ended $((SECONDS - majors_started)) s after it started" >> "$work/majors.times"
    exit $rc
} &
majors_pid=$!

stage "META.json (PGXN meta spec), make dist, the docs (README.md's size, links, docs/reference.md, internal references), the SQL's lock order and the Grafana dashboard"
python3 "$COSID_ROOT/test/meta/check_meta.py" "$COSID_ROOT/META.json" "$COSID_ROOT/cosid.control" > "$work/meta.log" 2>&1 || true
# the docs, and the store's lock order in the SQL functions (test/meta/check_sql.py says which
# rules); a checker that crashes counts as a failure too
for checker in check_docs.py check_sql.py; do
    for arg in "$COSID_ROOT" --self-test; do
        python3 "$COSID_ROOT/test/meta/$checker" "$arg" > "$work/checker.log" 2>&1 \
            || grep -q '^not ok' "$work/checker.log" || echo "not ok - $checker $arg ran" >> "$work/checker.log"
        cat "$work/checker.log" >> "$work/meta.log"
    done
done
# the Grafana dashboard against the exporter's query file (test/e2e/prometheus.sh checks it
# against what the real exporter emits)
python3 "$COSID_ROOT/test/meta/check_grafana.py" "$COSID_ROOT/contrib/grafana/cosid.json" \
    "$COSID_ROOT/contrib/prometheus/cosid_queries.yaml" >> "$work/meta.log" 2>&1 \
    || grep -q '^not ok' "$work/meta.log" || echo "not ok - check_grafana.py ran" >> "$work/meta.log"
version=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$COSID_ROOT/META.json" 2>/dev/null || echo none)
if make -C "$COSID_ROOT" -s dist DIST_DIR="$work" > "$work/dist.log" 2>&1; then
    python3 "$COSID_ROOT/test/meta/check_dist.py" "$work" "$(git -C "$COSID_ROOT" ls-files | wc -l)" "$version" \
        >> "$work/meta.log" 2>&1 || true
else
    sed 's/^/#   /' "$work/dist.log"; echo "not ok - make dist" >> "$work/meta.log"
fi
grep -E '^(not ok|#)' "$work/meta.log" || true  # '#': a failure's details, and warnings
meta_ok=$(grep -c '^ok' "$work/meta.log" || true); meta_bad=$(grep -c '^not ok' "$work/meta.log" || true)
echo "META.json, make dist and docs: $meta_ok passed, $meta_bad failed"
total_passed=$((total_passed + meta_ok)); total_failed=$((total_failed + meta_bad))
[ "$meta_bad" = 0 ] || { echo "total: $total_passed passed, $total_failed failed"; exit 1; }

# The end-to-end scripts on PostgreSQL 15 run in lanes beside the majors' lane (4, or
# COSID_E2E_LANES: most of a script's time is waiting for leases, clocks and servers, not
# CPU).  Every lane takes the next script from one queue, longest first (LPT: the seconds
# below, each script's time in a run of the whole command on 2 cores, as the "LPT table of
# this run" line after the lanes prints them; a script not listed comes after them, in name
# order), so that the lanes end together.
# Their packages were installed above, so any script may run in any lane.  Each lane has its
# own work directory, and the initdb template they copy from is made before they start
# (scripts/lib.sh).
LANES=${COSID_E2E_LANES:-4}
DURATIONS="
chaos.sh 135  patroni.sh 132  unseen_limits.sh 91  static_ceiling_ops.sh 79
store_failover.sh 68  faults_process.sh 62  static_slots.sh 60  acquire_cost.sh 62
static_ceiling.sh 54  fork.sh 52  store_restore.sh 52  upgrade.sh 52  citus.sh 46
store_restore_staged.sh 43  store_restore_race.sh 40  faults_clock_store.sh 39  health.sh 38
limit_raise_lost.sh 38  model_compare.sh 37  doc_blocks.sh 36  lease_edges.sh 36
keeper_pass_large_pool.sh 32  store_restart.sh 32  shared_store.sh 31  floor_bounds.sh 30
no_preload.sh 30  regional.sh 27  bind_defaults.sh 26  applications.sh 25  pgbouncer.sh 23
raised_floor_wait.sh 23  pass_row_lock.sh 22  static_release_race.sh 22  store_change.sh 22
raise_clock_behind.sh 21  raised_mixed_release.sh 21  raised_twice_outage.sh 21
static_no_file.sh 21  keeper_transient.sh 20  remote_store_edges.sh 20
raised_floor_seconds.sh 19  drop_database.sh 18  clock_jump.sh 17  concurrency.sh 17
raised_release_all.sh 17  prometheus.sh 14  settings_no_stop.sh 14  logical_replication.sh 13
raised_keeper_exit.sh 13  raised_idle_successor.sh 12  raised_keeper_restart.sh 12
readme_start.sh 12  databases.sh 11  tenants.sh 11  pooler.sh 10  raised_max_namespaces.sh 10
raised_other_slot_order.sh 10  raised_outage.sh 10  adopt.sh 9  raised_order.sh 9
regional_range_race.sh 9  drop_extension.sh 7  shared_slot.sh 7  store_refusal.sh 7
lock_order.sh 6  partman.sh 6  slow_commit.sh 6  raise_scale.sh 5  raised_release_own.sh 5
regional_local_history.sh 5  store_dsn_secret.sh 5  drop_guard_edges.sh 4  dump_restore.sh 3
acquire_batch.sh 45
static_switch.sh 2
"
# the packages the lanes use, installed in the background since the start
apt_status=0
wait "$apt_pid" || apt_status=$?
apt_pid=""
if [ "$apt_status" != 0 ]; then
    sed 's/^/#   /' "$work/apt.log" | tail -20
    echo "not ok - installing the end-to-end scripts' and static checks' packages"; total_failed=$((total_failed + 1))
fi
fresh_cluster "$work/template-probe" && rm -rf "$work/template-probe"
{
    for t in "$COSID_ROOT"/test/e2e/*.sh; do
        name=$(basename "$t")
        # pg_upgrade between majors runs at the end of the majors' lane (scripts/majors.sh says why)
        [ "$name" = pg_upgrade.sh ] && continue
        secs=$(awk -v n="$name" '{ for (i = 1; i < NF; i += 2) if ($i == n) print $(i + 1) }' <<<"$DURATIONS")
        echo "${secs:-0} $name"
    done | sort -k1,1nr -k2,2 | cut -d' ' -f2
} > "$work/queue"
next_script() {  # next_script: takes the next script off the queue ("" when none is left)
    ( flock 9; n=$(head -1 "$work/queue"); [ -z "$n" ] || sed -i 1d "$work/queue"; echo "$n" ) 9>"$work/queue.lock"
}
lanes_started=$SECONDS
run_lane() {  # run_lane N: scripts off the queue until it is empty; "e2e lane N: P passed, F failed" at the end
    local lane=$1 t name passed=0 failed=0 started
    # the logs the running script's servers wrote, NUL-separated
    script_logs() { find "$work/e2e$lane" -name '*.log' -newer "$work/e2e$lane/.started" -print0 2>/dev/null; }
    while name=$(next_script) && [ -n "$name" ]; do
        t="$COSID_ROOT/test/e2e/$name"
        [ -e "$t" ] || continue  # a listed script that is gone
        log "end-to-end (lane $lane): $name"
        started=$SECONDS
        mkdir -p "$work/e2e$lane"; touch "$work/e2e$lane/.started"
        local before; before=$(ls -A "$work/e2e$lane")
        # (a script that passed leaves nothing behind: the lanes' directories held 13 GB by the
        # end of a run, and filled a shared machine's disk; what a failed one left is kept, to
        # be read)
        local ok=0
        cpu_run "$work/e2e$lane.cpu" bash "$t" "$work/e2e$lane" || ok=$?
        if [ -n "${COSID_SLOW_MS:-}" ]; then  # (scripts/lib.sh's server_conf: the statements its servers logged as slow)
            script_logs | xargs -0 -r grep -h 'duration: ' 2>/dev/null | sed -E 's/^.*duration: ([0-9.]+) ms +(statement|execute [^:]*): /\1 /' |
                sort -rn | head -5 | cut -c1-240 | sed "s/^/# slow in $name: /" || true
        fi
        if [ "$ok" = 0 ]; then passed=$((passed + 1))
            comm -13 <(sort <<<"$before") <(ls -A "$work/e2e$lane" | sort) | grep -vx '.started' |
                sed "s|^|$work/e2e$lane/|" | xargs -r -d '\n' rm -rf
        else
            failed=$((failed + 1)); echo "# FAILED: $name"
            # what its servers logged as errors, and the keepers' failed store calls (a failure on a
            # loaded CI machine is read from here)
            script_logs | xargs -0 -r grep -hE 'ERROR|FATAL|PANIC|terminated by signal|cosid: .*(failed|not confirmed)' 2>/dev/null | sort -u | tail -20 |
                cut -c1-300 | sed 's/^/#   server log: /' || true
        fi
        echo "# $name took $((SECONDS - started)) s, $(cat "$work/e2e$lane.cpu") CPU-s"
    done
    echo "# e2e lane $lane ended $((SECONDS - lanes_started)) s after the lanes started"
    echo "e2e lane $lane: $passed passed, $failed failed"
}
stage "end-to-end scripts on PostgreSQL 15 in $LANES lanes: lanes 2 to $LANES in the background (their output follows lane 1's)"
lane_pids=()
for lane in $(seq 2 "$LANES"); do run_lane "$lane" > "$work/lane$lane.log" 2>&1 & lane_pids+=($!); done
run_lane 1 | tee "$work/lane1.log"
for p in "${lane_pids[@]}"; do wait "$p" || true; done
for lane in $(seq 2 "$LANES"); do cat "$work/lane$lane.log"; done
status=0
[ "$apt_status" = 0 ] || status=1
passed=0
failed=0
for f in $(seq -f "$work/lane%g.log" 1 "$LANES"); do
    p=$(grep -oE '^e2e lane [0-9]+: [0-9]+ passed' "$f" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || true)
    q=$(grep -oE '^e2e lane [0-9]+: [0-9]+ passed, [0-9]+ failed' "$f" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' || true)
    [ -z "$p" ] && { q=$((${q:-0} + 1)); echo "# $(basename "$f"): the lane did not finish"; }
    passed=$((passed + ${p:-0})); failed=$((failed + ${q:-0}))
done
[ "$failed" = 0 ] || status=1
# What the scripts cost, and this run's LPT table (to paste into DURATIONS above when scripts
# were added or changed): each script's wall seconds, longest first.
scripts_cost=$(cat "$work"/lane*.log | grep -E '^# [a-z_0-9]+\.sh took [0-9]+ s, [0-9?]+ CPU-s$' || true)
awk '{ w += $4; c += $6 } END { printf "# e2e on 15: %d scripts, %d s of wall time and %d CPU-s in all\n", NR, w, c }' <<<"$scripts_cost"
echo "# LPT table of this run:$(awk '{ print $4, $2 }' <<<"$scripts_cost" | sort -k1,1nr | awk '{ printf " %s %s", $2, $1 }')"
echo
echo "e2e (PostgreSQL 15): $passed passed, $failed failed"
total_passed=$((total_passed + passed)); total_failed=$((total_failed + failed))

stage "pg_regress and isolation specs (they ran beside the end-to-end scripts)"
wait "$regress_pid" || true; regress_pid=""
cat "$work/installcheck.log"
if [ "$(cat "$work/installcheck.rc" 2>/dev/null)" != 0 ]; then
    for f in "$work"/test/out/regression.diffs "$work"/test/out_isolation/regression.diffs; do
        [ -f "$f" ] && cat "$f"
    done
    bad=$(grep -cE '\.\.\. FAILED' "$work/installcheck.log" || true)
    echo "not ok - pg_regress and isolation: ${bad:-0} failed (or did not run)"
    total_failed=$((total_failed + (${bad:-0} > 0 ? ${bad:-0} : 1))); status=1
fi
total_passed=$((total_passed + $(grep -cE '\.\.\. ok' "$work/installcheck.log")))

stage "the model checker (it ran before the end-to-end scripts)"
grep -E '^(ok|not ok)|^# the model' "$work/model.log" || true
grep -q '^not ok' "$work/model.log" && sed -n '/^not ok/,+3p;/^#   /p' "$work/model.log" | head -80
model_ok=$(grep -c '^ok' "$work/model.log" || true); model_bad=$(grep -c '^not ok' "$work/model.log" || true)
echo "model checker: $model_ok passed, $model_bad failed"
total_passed=$((total_passed + model_ok)); total_failed=$((total_failed + model_bad))
[ "$model_bad" = 0 ] || status=1

stage "PostgreSQL 16 to 19, pg_upgrade"
majors_status=0
wait "$majors_pid" || majors_status=$?
majors_pid=""
cat "$work/majors.log"
cat "$work/majors.times" "$work/package.times" 2>/dev/null || true
echo "# the other majors took $((SECONDS - majors_started)) s (beside the end-to-end scripts)"
mp=$(grep -oE '^majors: [0-9]+ passed' "$work/majors.log" | grep -oE '[0-9]+' || true)
mf=$(grep -oE '^majors: [0-9]+ passed, [0-9]+ failed' "$work/majors.log" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' || true)
total_passed=$((total_passed + ${mp:-0})); total_failed=$((total_failed + ${mf:-0}))
if [ "$majors_status" != 0 ]; then
    status=1
    [ -z "$mf" ] && total_failed=$((total_failed + 1))
fi

# dpkg -i replaces the development install of PostgreSQL 15's cosid: only after the suites.
stage "the Debian package: dpkg -i into PostgreSQL 15, smoke test, dpkg -r"
wait "$package_pid" || true; package_pid=""
tail -3 "$work/package.log"
deb=$(ls "$work"/deb/postgresql-15-cosid_*_amd64.deb 2>/dev/null | head -1 || true)
if [ "$(cat "$work/package.rc" 2>/dev/null)" = 0 ] && [ -n "$deb" ]; then
    total_passed=$((total_passed + 1))
    if bash "$COSID_ROOT/test/package/smoke.sh" "$deb" "$work" > "$work/smoke.log" 2>&1; then :; else status=1; fi
    cat "$work/smoke.log"
    total_passed=$((total_passed + $(grep -c '^ok' "$work/smoke.log" || true)))
    total_failed=$((total_failed + $(grep -c '^not ok' "$work/smoke.log" || true)))
else
    cat "$work/package.log"; echo "not ok - the package was not built"
    total_failed=$((total_failed + 1)); status=1
fi
make -C "$COSID_ROOT" -s install >/dev/null  # the development install again, as before the package

stage "shellcheck, cppcheck, clang-tidy, ASan and UBSan (they ran beside the lanes, niced)"
wait "$static_pid" || true; static_pid=""
cat "$work/static.log"
static_ok=$(grep -c '^ok' "$work/static.log" || true); static_bad=$(grep -c '^not ok' "$work/static.log" || true)
[ "$static_ok" -gt 0 ] || static_bad=$((static_bad + 1))
echo "static checks: $static_ok passed, $static_bad failed"
total_passed=$((total_passed + static_ok)); total_failed=$((total_failed + static_bad))
[ "$static_bad" = 0 ] || status=1
# Every failure again at the end, where a reader of a long log (or of its tail only) looks:
# the check's line and the script it came from.
if [ "$status" != 0 ]; then
    echo "failures:"
    for f in "$work/installcheck.log" "$work/model.log" $(seq -f "$work/lane%g.log" 1 "$LANES") "$work/majors.log" "$work/smoke.log" "$work/static.log"; do
        [ -f "$f" ] && awk -v lane="$(basename "$f" .log)" '
            /^==> end-to-end/ { script = $NF }
            /^# FAILED: / { print "  " lane ": " $3 " failed" }
            /^not ok/ { print "  " lane (script ? " " script : "") ": " $0 }
            /^#   pg[0-9]+ [a-z_]+\.sh: not ok/ { print "  " lane ": " substr($0, 5) }
            /^#   pg_upgrade\.sh: not ok/ { print "  " lane ": " substr($0, 5) }
            /^major [0-9]+: .*FAILED/ { print "  " lane ": " $0 }
            /^#   pg[0-9]+: .*error:/ { print "  " lane ": " substr($0, 5) }' "$f"
    done | head -40
fi
echo "total: $total_passed passed, $total_failed failed"
exit $status
