#!/usr/bin/env bash
# The tight loop of cosid_next() of this tree against older commits, in one run on one server
# configuration: each commit is built in a worktree of its own and installed in turn, and the
# rounds alternate between them, so the machine's noise falls on every commit alike.
# Per commit: ns per call of cosid_next() (in a namespace of 21 sequence bits, where the cap
# of 4096 ids per ms never binds), of nextval() and of pg_backend_pid() (a C function that
# returns a number it already has: the cost of a call and nothing else), and cosid_next()'s
# margin over that empty call.  Nothing asserts: this machine is noisy.
#   bash bench/side_by_side.sh                 (REFS="57ad8a3 HEAD" ROUNDS=3 N=2000000)
# It reinstalls this tree's build at the end.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
install_prerequisites
read -ra refs <<<"${REFS:-57ad8a3 HEAD}"
rounds=${ROUNDS:-3}; n=${N:-2000000}
dir=/tmp/cosid-bench-sbs; port=55481
trap 'stop_server "$dir" immediate; build_and_install' EXIT

build_ref() {  # build_ref REF: its build in /tmp/cosid-sbs-REF (a worktree of this repository)
    local w="/tmp/cosid-sbs-$1"
    rm -rf "$w"; git -C "$COSID_ROOT" worktree prune
    git -C "$COSID_ROOT" worktree add -f --detach "$w" "$1" >/dev/null 2>&1
    make -C "$w" -s -j2 >/dev/null 2>&1
}
ns_per_call() {  # ns_per_call EXPR: best of 3 runs of SELECT count(EXPR) over n rows
    psql_at "$dir" "$port" postgres -At -c "SET cosid.namespace = 'wide'" -c "SELECT cosid_next()" >/dev/null
    psql_at "$dir" "$port" postgres -At -c "SET cosid.namespace = 'wide'" -c "
        DO \$\$ DECLARE t0 timestamptz; best float8 := 1e9; BEGIN
            FOR i IN 1..3 LOOP
                t0 := clock_timestamp();
                PERFORM count($1) FROM generate_series(1, $n);
                best := least(best, extract(epoch FROM clock_timestamp() - t0));
            END LOOP;
            RAISE NOTICE 'ns %', round((best * 1e9 / $n)::numeric, 1);
        END \$\$" 2>&1 | sed -n 's/.*NOTICE:  ns //p'
}
measure() {  # measure REF: installs REF's build, prints "REF cosid nextval empty margin"
    make -C "/tmp/cosid-sbs-$1" -s install >/dev/null 2>&1
    start_server "$dir" "$port"
    psql_at "$dir" "$port" postgres -c "CREATE EXTENSION cosid" -c "CREATE SEQUENCE s1" \
        -c "SELECT cosid_namespace_create('wide', slot_bits => 1, sequence_bits => 21)" >/dev/null
    local c s e
    c=$(ns_per_call "cosid_next()"); s=$(ns_per_call "nextval('s1')"); e=$(ns_per_call "pg_backend_pid()")
    stop_server "$dir"
    printf '%-10s %10s %10s %10s %10s\n' "$1" "$c" "$s" "$e" "$(awk -v c="$c" -v e="$e" 'BEGIN { printf "%.1f", c - e }')"
}

for r in "${refs[@]}"; do build_ref "$r"; done
echo "ns per call, SELECT count(f()) over $n rows, best of 3, $(nproc) cores; rounds alternate the commits"
printf '%-10s %10s %10s %10s %10s\n' commit cosid_next nextval empty "cosid-empty"
for i in $(seq 1 "$rounds"); do
    order=("${refs[@]}"); [ $((i % 2)) = 0 ] && mapfile -t order < <(printf '%s\n' "${refs[@]}" | tac)
    for r in "${order[@]}"; do measure "$r"; done
done
for r in "${refs[@]}"; do git -C "$COSID_ROOT" worktree remove -f "/tmp/cosid-sbs-$r" >/dev/null 2>&1 || true; done
