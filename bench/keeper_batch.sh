#!/usr/bin/env bash
# Store transactions of one instance's keeper per minute, with 1, 10 and 100 namespaces
# leased (issue 26: one round trip per keeper pass).  A store server S holds the leases in
# a database of its own ("store"), so that pg_stat_database's commits there are the
# instance's keeper's only; the instance I points cosid.store_dsn at it and holds one lease
# in each namespace (cosid.pool_idle_timeout long: none is released while measuring).
# Measures the installed cosid (build and install it first, as bench/run.sh does).
#   bash bench/keeper_batch.sh               (ttl 3 s, 30 s per case)
#   TTL_MS=30000 SECS=60 bash bench/keeper_batch.sh
# Not a test: prints the figures, asserts nothing.
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../test/lib/check.sh"
base="${1:-/tmp/cosid-bench-batch}"
S="$base/store"; I="$base/inst"; PS=55488; PI=55489
TTL_MS="${TTL_MS:-3000}"; SECS="${SECS:-30}"; CASES="${CASES:-1 10 100}"
# shellcheck disable=SC2154  # d: the for loop's variable inside the trap string
trap 'for d in "$I" "$S"; do stop_server "$d" immediate; done' EXIT
qs() { psql_at "$S" "$PS" "${DB:-store}" -At "$@"; }
qi() { psql_at "$I" "$PI" postgres -At "$@"; }
store_xacts() { DB=postgres qs -c "SELECT pg_stat_clear_snapshot()" \
    -c "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = 'store'" | tail -1; }

echo "# machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); ttl $TTL_MS ms (renewals every $((TTL_MS / 3)) ms); $SECS s per case"
printf '%-12s %18s %18s %14s\n' namespaces "store xacts/min" "keeper calls/min" "vs 1 ns"
base_rate=""
for n in $CASES; do
    start_server "$S" "$PS"
    DB=postgres qs -c "CREATE DATABASE store" >/dev/null
    qs -c "CREATE EXTENSION cosid" 2>/dev/null -c "SELECT count(cosid_namespace_create('n' || g)) FROM generate_series(1, $n) g" >/dev/null
    start_server "$I" "$PI" "cosid.store_dsn = 'host=$S port=$PS dbname=store'" "cosid.ttl = '${TTL_MS}ms'" \
        "cosid.pool_idle_timeout = '1h'"
    qi -c "CREATE EXTENSION cosid" >/dev/null
    for g in $(seq 1 "$n"); do qi -c "SET cosid.acquire_timeout = '20s'" -c "SELECT cosid_next('n$g')" >/dev/null; done
    wait_for 60 "$n leases" qi -c "SELECT count(*) = $n FROM cosid_pool() WHERE state = 'active'" >/dev/null
    sleep "$(awk -v t="$TTL_MS" 'BEGIN {print t / 1000}')"  # one ttl: renewals in their steady rhythm
    x0=$(store_xacts); k0=$(qi -c "SELECT store_transactions FROM cosid_stats()")
    sleep "$SECS"
    x1=$(store_xacts); k1=$(qi -c "SELECT store_transactions FROM cosid_stats()")
    held=$(qi -c "SELECT count(*) FROM cosid_pool() WHERE state = 'active'")
    lost=$(qi -c "SELECT leases_lost FROM cosid_stats()")
    rate=$(( (x1 - x0) * 60 / SECS )); krate=$(( (k1 - k0) * 60 / SECS ))
    [ -z "$base_rate" ] && base_rate=$rate
    printf '%-12s %18s %18s %14s   (%s leases held, %s lost)\n' "$n" "$rate" "$krate" \
        "$(awk -v a="$rate" -v b="$base_rate" 'BEGIN {printf "%.2fx", a / b}')" "$held" "$lost"
    stop_server "$I" immediate; stop_server "$S" immediate
done
