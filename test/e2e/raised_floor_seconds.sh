#!/usr/bin/env bash
# A namespace of seconds (unit 's') after a raise: the first window's floor lies ahead of the
# clock (max_ttl + 2 x max_tolerance), the store grants it empty until its clock comes within
# the lease's ttl + tolerance of it (1 s after the raise here), and the keeper renews it every
# 250 ms until it holds a whole tick.  It opens with a ceiling a few ms above the floor: not empty by
# `ceiling > floor`, but without a whole second in (floor, ceiling], so no id fits.  The keeper
# then renews it at ttl/3 only (10 s with cosid.ttl's 30 s), and the caller waits for that;
# with cosid.acquire_timeout below it the caller fails with ZC002 ("ended and was not
# renewed").  What the rule needs is max_tolerance (1 s) plus up to a second to the next whole
# second: a ms namespace gets its first id after ~1 s.
# Ports 57410.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
base="${1:-/tmp/cosid-e2e}/raised_floor_seconds"
DIR="$base"; PORT=57410
trap 'node_stop main immediate' EXIT
node_up main "$DIR" "$PORT" "cosid.acquire_timeout = '4s'"
q -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_tolerance => '1s')" >/dev/null
# shellcheck disable=SC2034  # read through tries=TRIES_$u
TRIES_s=5 TRIES_ms=3  # a window opens tickless ~3 times in 4: five tries all lucky ~1 in 1000
for u in s ms; do
    tries=TRIES_$u
    for i in $(seq 1 ${!tries}); do
        q -c "SELECT cosid_namespace_create('n_${u}_$i', unit => '$u', tolerance => '1s')" >/dev/null
    done
done
for u in s ms; do
    tries=TRIES_$u
    for i in $(seq 1 ${!tries}); do
        # a raise (the store restored, a copy of it acknowledged), then the namespace's first id
        raise_store_floors
        t0=$(now_ms)
        out=$(q -v VERBOSITY=sqlstate -c "SELECT cosid_next('n_${u}_$i')" 2>&1 || true)
        took=$(( $(now_ms) - t0 ))
        echo "# unit $u, try $i: first id after ${took} ms ($(head -1 <<<"$out" | cut -c1-40))"
        check_true "unit $u, try $i: the first id after a raise comes without an error" \
            "$([[ "$out" =~ ^[0-9]+$ ]] && echo t || echo f)"
        check_true "unit $u, try $i: within max_tolerance + a second + a renewal (3.5 s), not at ttl/3" \
            "$([ "$took" -lt 3500 ] && echo t || echo f)"
    done
done
exit $FAIL
