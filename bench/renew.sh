#!/usr/bin/env bash
# A store's renewal rate: the current store against the store as it was in an older version
# (BASELINE, 1.3 by default: before the guards of 1.4 to 1.6), side by side in one server, one
# database each (this library serves every older catalog).  5,000 leases, 8
# clients renewing random ones, each renewal one transaction (cosid._durable() and
# cosid.renew, as the keeper sends it).  Rounds alternate between the two stores; the
# ratio is current/BASELINE per round.  Nothing asserts: this machine is noisy.
#   bash bench/renew.sh            (as root; ROUNDS=3 SECONDS_PER_RUN=10 BASELINE=1.3 by default)
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
install_prerequisites
build_and_install
rounds="${ROUNDS:-3}"; secs="${SECONDS_PER_RUN:-10}"; base="${BASELINE:-1.3}"
dir=/tmp/cosid-bench-renew; port=55480
# No keeper in either database: cosid.database names a third one.
start_server "$dir" "$port" "cosid.database = 'nokeeper'" "synchronous_commit = on"
q() { psql_at "$dir" "$port" "$@"; }
for v in current "$base"; do
    db="store_${v//./_}"
    q postgres -c "CREATE DATABASE $db" >/dev/null
    ext="CREATE EXTENSION cosid"; [ "$v" = current ] || ext="CREATE EXTENSION cosid VERSION '$v'"
    q "$db" -c "SET client_min_messages = error" -c "$ext" \
        -c "SELECT cosid_namespace_create('b', slot_bits => 13)" >/dev/null
    q "$db" -c "CREATE TABLE held (slot int PRIMARY KEY, incarnation uuid, fence bigint)" \
        -c "INSERT INTO held SELECT a.slot, x.inc, a.fence FROM generate_series(0, 4999) g,
              LATERAL (SELECT gen_random_uuid() AS inc) x,
              LATERAL cosid.acquire('b', 'owner' || g, x.inc, 30000, g) a" \
        -c "VACUUM ANALYZE" >/dev/null
done
cat > "$dir/renew.sql" <<'EOF'
\set s random(0, 4999)
SELECT quote_literal(incarnation) AS inc, fence AS f FROM held WHERE slot = :s \gset
SELECT slot FROM cosid._durable() durable, cosid.renew('b', :s, :inc::uuid, :f, 30000);
EOF
chown -R "$PG_USER" "$dir"
rate() {  # rate DB: renewals per second over secs seconds
    as_pg "$PG_BIN/pgbench" -n -h "$dir" -p "$port" -c 8 -j 2 -T "$secs" -f "$dir/renew.sql" "$1" 2>/dev/null |
        sed -n 's/^tps = \([0-9.]*\).*/\1/p' | cut -d. -f1
}
echo "renewals per second, 5,000 leases, 8 clients, $secs s a run, $(nproc) cores"
printf '%-6s %10s %10s %7s\n' round current "$base" ratio
for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) = 1 ]; then a=$(rate store_current); b=$(rate "store_${base//./_}")
    else b=$(rate "store_${base//./_}"); a=$(rate store_current); fi
    printf '%-6s %10s %10s %7s\n' "$r" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }')"
done
stop_server "$dir"
