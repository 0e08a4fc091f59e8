#!/usr/bin/env bash
# The exhaustive model checker (test/model/run_model) in the test command: first the bounds
# the rules are checked to (no violation may be found), then its teeth: for every path to a
# duplicate id (or, in the tenant bounds, a server refused a window by another login) found so
# far, the rule that closes it is switched off and the checker must reach a violation, print its
# shortest trace, and find none to that depth with the rule on.  A tooth with --preset starts
# from a few of the model's own moves (printed as "preset:"), where the finding is deeper than a
# bound can afford from the plain start.
# Prints "ok - ..." / "not ok - ..." lines (scripts/test.sh counts them) and the traces under
# "#".  About 2 min on 2 shared cores, as before issue 41's moves; the time limits (150 s a
# bound, 90 s a tooth) only stop a runaway.  Usage: model_checks.sh [ROOT] [--teeth-only | --bounds-only]
set -u
root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
what="${2:-all}"
run="$root/test/model/run_model"
make -C "$root" -s test/model/run_model COSID_WERROR=1 || { echo "not ok - make test/model/run_model"; exit 1; }
out="$(mktemp -d /tmp/cosid-model.XXXXXX)"
trap 'rm -rf "$out"' EXIT
failed=0
started=$SECONDS

# The bounds.  Each line: a name, then run_model's arguments.  All moves at once reach depth 6
# within seconds; smaller sets of moves go deeper.
BOUNDS=(
  "every move but issue 41's (limits, databases, tenants), two issuers on I0's own store (S0) and a fork|--depth 6"
  "every move but issue 41's, two issuers on a store server of its own (S1, which fails over and is restored)|--central --depth 5"
  "one store server of its own: loss, crashes, restarts, clocks, failover, restore, keeper logins|--central --only core,loss,crash,restart,clock,store-clock,failover,restore,keeper-login --depth 6"
  "drops, namespaces made again, layout edits|--only core,crash,restart,clock,drop,namespace --depth 6"
  "a store that fails over while its lease issues: the lease the raise freed goes on beside its successor, on the same slot|--central --only core,failover --depth 9"
  "forks and pg_upgrade of one issuing server|--issuers 1 --only core,crash,restart,clock,fork --depth 8"
  "an issuer moving between stores|--issuers 1 --only core,loss,crash,restart,clock,move-store --depth 8"
  "static slots with a state file: switches, crashes, forks|--issuers 1 --static-start --only core,crash,restart,static,fork --depth 8"
  "static slots with a state file and clock steps (a window used up ahead of a clock that stepped back goes on from its ids)|--issuers 1 --static-start --only core,crash,restart,clock,static --depth 9"
  "static slots without a state file|--issuers 1 --static-start --static-no-file --only core,crash,restart,clock,static --depth 9"
  "limits raised and lowered on a store server of its own, bursts, failovers, dumps taken at any moment and restored|--central --only core,failover,restore,limits --depth 6"
  "limits raised and lowered on the original's store and its copy's, forks (promoted, or with a cosid.fork file) acknowledged|--issuers 1 --only core,restart,fork,limits --depth 6"
  "static slots with limit changes (static_ahead, max_ttl) and forks|--issuers 1 --static-start --only core,restart,fork,static,limits --depth 6"
  "a limit lowered under a live window, then failovers|--central --only core,failover,limits --preset grant-then-lower --depth 6"
  "a copy switching between its server's two databases|--issuers 1 --only core,restart,fork,databases --depth 7"
  "tenants: a login holding a lock, a keeper role hoarding slots (no server refused a window)|--central --issuers 1 --only core,loss,crash,tenants --depth 8"
)

# The teeth.  Each line: the rule(s) switched off (a comma between two), the path of the fault
# table (docs/faults.md) it closes, then run_model's arguments.
TEETH=(
  "window|a process paused past its ceiling|--only core --depth 8"
  "next-floor|a new holder's window below the last holder's ceiling|--only core,clock --depth 8"
  "fence|a keeper that goes on after its renewal found the lease lost|--only core --depth 8"
  "commit|a remote store whose commits fail after the rows were sent|--only core,loss --depth 8"
  "live-regrant|a failed release, then the same incarnation handed its live lease back|--only core,loss --depth 7"
  "flush|a store with synchronous_commit = off that crashes|--only core,crash --depth 7"
  "raise-failover|a store failover to an asynchronous standby that missed a tail|--central --only core,failover --depth 8"
  "raise-restore|a store restored from its nightly dump|--central --only core,restore --depth 8"
  "restore-mark|pg_restore -j / data-only: lease rows before the origin's record|--central --only core,restore --depth 8"
  "arrive-raised|pg_restore -j: lease rows that arrive after the raise|--central --only core,restore --depth 10"
  "max-ttl|a keeper login asking for a lease longer than max_ttl, then a failover|--central --only core,failover,keeper-login --depth 9"
  "drop-guard|DROP EXTENSION (or DROP OWNED BY, a cascade, DROP DATABASE) with a window ahead|--only core,drop,clock --depth 8"
  "forget-guard|DELETE / TRUNCATE of cosid.lease, a namespace made again|--only core,namespace,clock --depth 8"
  "first-floor|a namespace lost in a failover's tail, made again|--central --ns-absent --only core,failover,namespace --depth 10"
  "layout-guard|a superuser's UPDATE of a live namespace's layout|--only core,namespace --depth 9"
  "role-guard|a second keeper role releasing another server's lease|--only core,keeper-login --depth 6"
  "fork-detect|a promoted standby of an issuing server upgraded by pg_upgrade --link before its acknowledgment (its new cluster has no cosid.history)|--issuers 1 --only core,fork --depth 9"
  "record-at-start|a copy made before the original's first id|--issuers 1 --only core,fork --depth 9"
  "record-kept|a copy of a server after a clean restart|--issuers 1 --only core,restart,fork --depth 10"
  "fork-marker|pg_upgrade's old cluster started again|--issuers 1 --only core,fork --depth 10"
  "store-history|an instance that changes its store|--issuers 1 --only core,clock,move-store --depth 6"
  "static-durable|a static ceiling used before it is durable, then kill -9|--issuers 1 --static-start --only core,crash,static --depth 6"
  "static-floor|a static slot restarted after kill -9 or with its clock back|--issuers 1 --static-start --only core,crash,static --depth 6"
  "static-nofile-borrow|static slots without a state file borrowing ahead, then a restart|--issuers 1 --static-start --static-no-file --only core,crash,static --depth 9"
  "static-nofile-start|static slots without a state file restarted in the same tick|--issuers 1 --static-start --static-no-file --only core,crash,static --depth 6"
  "static-timeline,fork-datadir|a promoted standby with its origin's static state file|--issuers 1 --static-start --only core,fork,static --depth 6"
  "static-rows,raise-cluster|static slots across pg_upgrade (raise_floors_on_new_timeline off)|--issuers 1 --static-start --only core,restart,fork,static --depth 8"
  "switch-to-static|a namespace moved from leased to static issuing|--issuers 1 --only core,static --depth 6"
  "switch-to-leased|a namespace moved from static to leased issuing|--issuers 1 --static-start --only core,static --depth 6"
  "upgrade-note|pg_upgrade of a store's promoted standby stopped before any store call|--central --only core,failover,fork --depth 8"
  "reach-cap|a store restored from a dump taken before a max_ttl raise (issue 41, 2)|--central --issuers 1 --only core,restore,limits --preset dump-then-raise --depth 8"
  "reach-cap|a fork acknowledged after the original raised max_ttl (issue 41, 1)|--issuers 1 --only core,restart,fork,limits --preset copy-then-raise --depth 7"
  "reach-cap|a static copy acknowledged after the original raised static_ahead (issue 41, 3)|--issuers 1 --static-start --only core,restart,fork,static,limits --preset static-copy-then-raise --depth 7"
  "fork-datadir|a copy with a cosid.fork file switched to another database of its server (issue 41, 4)|--issuers 1 --only core,restart,fork,databases --depth 7"
  "tenant-lock|a login with no grants holding the acquire path's advisory key (issue 41, 5)|--central --issuers 1 --only core,tenants --depth 4"
  "lease-cap|one keeper role taking every slot (issue 41, 6)|--central --issuers 1 --only core,tenants --depth 5"
  "lease-cap-renew|one keeper role taking a slot, letting it expire, taking the next, and renewing both|--central --issuers 1 --only core,tenants --depth 7"
  "first-floor-cap|a namespace lost with a dump taken before it was made and before a max_ttl raise, made again after the restore|--central --ns-absent --only core,restore,namespace,limits --preset dump-before-namespace --depth 8"
  "drop-raise-guard|DROP EXTENSION after a restore that lost a namespace (no rows left to guard), then the namespace made again|--central --ns-absent --only core,restore,drop --preset dump-before-namespace --depth 8"
  "lazy-raise|a store failover whose raise wrote only the held rows: a free slot granted in the lost tail, acquired again without the raise|--central --only core,failover --depth 8"
)

ok() { echo "ok - model: $1"; }
bad() { echo "not ok - model: $1"; failed=$((failed + 1)); }

if [ "$what" != --teeth-only ]; then
    for b in "${BOUNDS[@]}"; do
        name="${b%%|*}"; args="${b#*|}"
        # shellcheck disable=SC2086
        "$run" $args --max-seconds 150 > "$out/run.log" 2>&1; rc=$?
        explored=$(grep -E '^explored' "$out/run.log" || true)
        grep -E '^bound' "$out/run.log" | sed 's/^/# /'
        if [ "$rc" = 0 ] && grep -q '^result: no violation' "$out/run.log"; then
            ok "$name: no violation ($explored)"
        else
            sed 's/^/#   /' "$out/run.log" | tail -40
            bad "$name: exit $rc"
        fi
    done
fi

if [ "$what" != --bounds-only ]; then
    for t in "${TEETH[@]}"; do
        rules="${t%%|*}"; rest="${t#*|}"; path="${rest%%|*}"; args="${rest#*|}"
        without=""
        for r in ${rules//,/ }; do without="$without --without $r"; done
        # Without the rule: a violation, with a trace that ends in the broken promise.
        # shellcheck disable=SC2086
        "$run" $args $without --expect-violation --max-seconds 90 > "$out/teeth.log" 2>&1; rc=$?
        if [ "$rc" = 0 ] && grep -q '^result: VIOLATION' "$out/teeth.log" && grep -q '^broken promise: ' "$out/teeth.log"; then
            moves=$(grep -oE 'VIOLATION after [0-9]+ moves' "$out/teeth.log" | grep -oE '[0-9]+')
            echo "# without $rules ($path):"
            grep '^  preset: ' "$out/teeth.log" | sed 's/^/#   /'
            sed -n '/^result: VIOLATION/,$p' "$out/teeth.log" | grep -v '^      -> ' | sed 's/^/#   /'
            # With the rule, the same moves to the same depth: none.
            depth_args=$(echo "$args" | sed -E "s/--depth [0-9]+/--depth $moves/")
            extra=""
            [ "${rules#*,}" != "$rules" ] && extra="--without ${rules#*,}"  # a second rule stays off
            # shellcheck disable=SC2086
            "$run" $depth_args $extra --max-seconds 90 > "$out/with.log" 2>&1; rc2=$?
            if [ "$rc2" = 0 ]; then
                what="a duplicate"
                grep -q '^broken promise: I[0-9] refused a window' "$out/teeth.log" && what="a server refused a window"
                ok "without $rules: the checker reaches $what in $moves moves ($path); with it none to that depth"
            else
                sed 's/^/#   /' "$out/with.log" | tail -30
                bad "with $rules the same bound ($depth_args) is not violation-free (exit $rc2)"
            fi
        else
            sed 's/^/#   /' "$out/teeth.log" | tail -20
            bad "without $rules ($path): no violation reached (exit $rc)"
        fi
    done
fi
echo "# the model checks took $((SECONDS - started)) s"
[ "$failed" = 0 ]
