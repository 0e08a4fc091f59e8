#!/usr/bin/env bash
# The keeper's pass stays linear in the pool's size: with cosid.max_namespaces at its largest
# (65536: 196608 pool entries) and 200 namespaces in use, their first ids come in seconds and
# the keeper idles between renewals:
#   bash test/e2e/keeper_pass_large_pool.sh WORKDIR
# A check for a freed lease of the same namespace, made for every lease in every pass, looked
# through the whole pool each time: 200 x 196608 entries of 2 kB a pass.  200 first ids then
# took ~40 s (each request waits for a pass) and the keeper used a third of a core or more
# with nothing to do.
# Checks: 200 first ids within 20 s (~7 s on a loaded 2-core machine); the keeper's CPU over
# 5 s below 15%; one more id in a new namespace within 1 s.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
DIR="${1:-/tmp/cosid-e2e}/keeper_pass_large_pool"; PORT=${PORT:-28460}; N=200
stop_server "$DIR" immediate
start_server "$DIR" "$PORT" "cosid.max_namespaces = 65536"
trap 'stop_server "$DIR" immediate' EXIT
q -c "CREATE EXTENSION cosid" -c "SELECT count(cosid_namespace_create('n' || i)) FROM generate_series(1, $N + 1) i" >/dev/null
t0=$(now_ms)
q -c "SELECT count(cosid_next('n' || i)) FROM generate_series(1, $N) i" >/dev/null
took=$(( $(now_ms) - t0 ))
kpid=$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'cosid keeper'")
c0=$(awk '{print $14 + $15}' "/proc/$kpid/stat"); s0=$(now_ms)
sleep 5
c1=$(awk '{print $14 + $15}' "/proc/$kpid/stat"); s1=$(now_ms)
cpu=$(( (c1 - c0) * 1000 / $(getconf CLK_TCK) * 100 / (s1 - s0) ))
t1=$(now_ms); q -c "SELECT cosid_next('n$((N + 1))')" >/dev/null; one=$(( $(now_ms) - t1 ))
echo "# $N first ids in $took ms; keeper CPU ${cpu}% over $(( s1 - s0 )) ms; one more namespace's first id in $one ms"
check_true "$N first ids within 20 s" "$([ "$took" -lt 20000 ] && echo t || echo f)"
check_true "the keeper's CPU below 15% while it only renews" "$([ "$cpu" -lt 15 ] && echo t || echo f)"
check_true "a new namespace's first id within 1 s" "$([ "$one" -lt 1000 ] && echo t || echo f)"
check "every lease held" "$N" "$(q -c "SELECT count(*) FROM cosid_pool() WHERE state = 'active' AND namespace <> 'n$((N + 1))'")"
exit $FAIL
