#!/usr/bin/env bash
# contrib/prometheus (issue 25): the alert rules pass promtool's checks and unit tests, and
# the real prometheus-postgres-exporter, run with cosid_queries.yaml against a test server
# as a pg_monitor role, serves every cosid series with the values the server has; after a
# planted renewal failure (the lease table locked against the keeper) the failure counter,
# the failing time and the health series move.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
apt_install_missing prometheus prometheus-postgres-exporter curl
CONTRIB="$COSID_ROOT/contrib/prometheus"
DIR="${1:-/tmp/cosid-e2e}/prometheus"; PORT=28020; EXPORTER_PORT=28021
exporter=""
trap '[ -n "$exporter" ] && kill "$exporter" 2>/dev/null; stop_server "$DIR" immediate' EXIT
# A port still taken (an exporter left by an earlier run) would answer in this one's place.
if curl -s -o /dev/null "http://127.0.0.1:$EXPORTER_PORT/"; then echo "not ok - port $EXPORTER_PORT is taken"; exit 1; fi
q() { psql_at "$DIR" "$PORT" postgres -At "$@"; }

echo "# the rules: promtool check rules, promtool test rules"
check_true "promtool check rules" "$(promtool check rules "$CONTRIB/cosid_alerts.yml" >/dev/null && echo t)"
out=$(cd "$CONTRIB" && promtool test rules cosid_alerts_test.yml 2>&1 || true)
check_true "promtool test rules: every rule's test passes" "$(grep -q SUCCESS <<<"$out" && ! grep -q FAILED <<<"$out" && echo t)"
# every alert of the rules file has a test
rules=$(grep -oP '^\s+- alert: \K\w+' "$CONTRIB/cosid_alerts.yml" | sort -u)
tested=$(grep -oP '^\s+alertname: \K\w+' "$CONTRIB/cosid_alerts_test.yml" | sort -u)
check "every alert rule is unit-tested" "$rules" "$tested"

echo "# the exporter against a test server"
start_server "$DIR" "$PORT" "cosid.ttl = '3s'"
q -c "CREATE EXTENSION cosid" -c "CREATE ROLE cosid_exporter LOGIN IN ROLE pg_monitor" >/dev/null
q -c "SELECT count(cosid_next()) FROM generate_series(1, 1000)" >/dev/null
cp "$CONTRIB/cosid_queries.yaml" "$DIR/queries.yaml"; chown "$PG_USER" "$DIR/queries.yaml"
# (its own pid in a file: the trap stops the exporter itself, not only runuser)
as_pg bash -c 'echo $$ > "$1/exporter.pid"; exec env DATA_SOURCE_NAME="$2" /usr/bin/prometheus-postgres-exporter \
    --web.listen-address="127.0.0.1:$3" --extend.query-path="$1/queries.yaml" --disable-default-metrics \
    --disable-settings-metrics' _ "$DIR" "host=$DIR port=$PORT dbname=postgres user=cosid_exporter sslmode=disable" \
    "$EXPORTER_PORT" >"$DIR/exporter.log" 2>&1 &
wait_for 10 "exporter pid" bash -c "[ -s '$DIR/exporter.pid' ] && echo t" >/dev/null
exporter=$(cat "$DIR/exporter.pid")
scrape() { curl -sf "http://127.0.0.1:$EXPORTER_PORT/metrics" >"$DIR/metrics" && cat "$DIR/metrics"; }
# value SERIES [LABELS_REGEX]: the value of the first sample of SERIES whose labels match
value() { scrape | awk -v s="$1" -v l="${2:-}" '$1 ~ "^"s"({|$)" && $1 ~ l {print $2; exit}'; }
has_value() { [ "$(value "$1" "${2:-}")" = "$3" ] && echo t || echo f; }  # has_value SERIES LABELS VALUE
check_true "the exporter serves /metrics" "$(wait_for 20 "exporter up" has_value cosid_keeper_ttl_seconds "" 3)"
check "no query of the file failed" "" "$(grep -i 'error' "$DIR/exporter.log" | grep -i cosid | head -3)"
for s in ids_issued acquires renewals renewal_failures leases_lost duplicate_owner_keys clock_skew_events \
         waits_at_ceiling releases store_transactions store_failovers static_writes static_write_failures; do
    check_true "series cosid_${s}_total" "$(grep -q "^cosid_${s}_total" "$DIR/metrics" && echo t)"
done
check_true "cosid_ids_issued_total counts the 1000 ids" "$(awk '$1 ~ /^cosid_ids_issued_total/ {print ($2 >= 1000) ? "t" : "f"}' "$DIR/metrics")"
check "cosid_renewal_failures_total is 0" 0 "$(value cosid_renewal_failures_total)"
check "one cosid_health_status series per check" 14 "$(grep -c '^cosid_health_status{' "$DIR/metrics")"
check "every check 0 (ok) on a healthy server" "" "$(grep '^cosid_health_status{' "$DIR/metrics" | awk '$2 != 0')"
check "cosid_namespace_slots{namespace=default}" 1024 "$(value cosid_namespace_slots 'namespace="default"')"
check "cosid_namespace_slots_in_use{namespace=default}: this server's lease" 1 \
    "$(value cosid_namespace_slots_in_use 'namespace="default"')"
check_true "cosid_layout_years_left{namespace=default} above 5" \
    "$(awk '$1 ~ /^cosid_layout_years_left{.*namespace="default"/ {print ($2 > 5) ? "t" : "f"}' "$DIR/metrics")"

echo "# the Grafana dashboard (contrib/grafana/cosid.json) against the series this exporter emits"
python3 "$COSID_ROOT/test/meta/check_grafana.py" "$COSID_ROOT/contrib/grafana/cosid.json" "$CONTRIB/cosid_queries.yaml" \
    "$DIR/metrics" > "$DIR/grafana.log" 2>&1 || true
cat "$DIR/grafana.log"
grep -q '^not ok' "$DIR/grafana.log" && FAIL=1
# every panel's query parses as PromQL: promtool checks them as recording rules (Grafana's
# variables put in as Grafana would)
python3 - "$COSID_ROOT/contrib/grafana/cosid.json" > "$DIR/grafana_rules.yml" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("groups:\n  - name: grafana\n    rules:")
for i, p in enumerate(d["panels"]):
    for t in p.get("targets", []):
        e = t["expr"].replace("$__rate_interval", "5m").replace("$instance", ".*")
        print("      - record: grafana_%d_%s\n        expr: %s" % (i, t["refId"], json.dumps(e)))
PY
check_true "every query of the dashboard parses (promtool check rules)" \
    "$(promtool check rules "$DIR/grafana_rules.yml" >/dev/null 2>&1 && echo t || echo f)"
check_true "check_grafana.py ran its 5 checks" "$([ "$(grep -c '^ok' "$DIR/grafana.log")" = 5 ] && echo t || echo f)"

echo "# a store whose max_ttl is below the keeper's ttl: leases granted shorter, a warning"
q -c "SELECT cosid_store_settings(max_ttl => '2 s')" >/dev/null
check_true "cosid_health_status{check=store_max_ttl} 1" "$(wait_for 20 "store_max_ttl 1" has_value cosid_health_status 'check="store_max_ttl"' 1)"
q -c "SELECT cosid_store_settings(max_ttl => '60 s')" >/dev/null
check_true "cosid_health_status{check=store_max_ttl} 0 again" "$(wait_for 20 "store_max_ttl 0" has_value cosid_health_status 'check="store_max_ttl"' 0)"

echo "# a planted renewal failure: the lease table locked against the keeper's renewals"
as_pg env PGAPPNAME=locker "$PG_BIN/psql" -X -q -h "$DIR" -p "$PORT" -d postgres \
    -c "BEGIN" -c "LOCK TABLE cosid.lease IN EXCLUSIVE MODE" -c "SELECT pg_sleep(120)" >/dev/null 2>&1 &
locker=$!
check_true "cosid_health_status{check=renewals} 2 after ttl/3 of failures" \
    "$(wait_for 20 "renewals 2" has_value cosid_health_status 'check="renewals"' 2)"
scrape >/dev/null
check_true "cosid_renewal_failures_total counts them" "$(awk '$1 ~ /^cosid_renewal_failures_total/ {print ($2 > 0) ? "t" : "f"}' "$DIR/metrics")"
check_true "cosid_keeper_renewal_failing_seconds above ttl/3" \
    "$(awk '$1 ~ /^cosid_keeper_renewal_failing_seconds/ {print ($2 > 1) ? "t" : "f"}' "$DIR/metrics")"
q -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'locker'" >/dev/null
wait "$locker" 2>/dev/null || true
check_true "renewals succeed again: cosid_keeper_renewal_failing_seconds 0" \
    "$(wait_for 20 "failing 0" has_value cosid_keeper_renewal_failing_seconds "" 0)"
check "cosid_health_status{check=renewals} 1 (recent failures)" 1 "$(value cosid_health_status 'check="renewals"')"
assert_store_verified "$DIR" "$PORT" postgres
exit $FAIL
