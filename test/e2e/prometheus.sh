#!/usr/bin/env bash
# contrib/prometheus (issue 25): the alert rules pass promtool's checks and unit tests, and
# the real prometheus-postgres-exporter, wired by docs/monitoring.md's own blocks (taken from
# the page by test/meta/doc_blocks.py --steps; only /etc, the ports and the socket directory
# changed, and Debian's systemd unit emulated) against a test server that authenticates as
# Debian's pg_hba.conf does: first with the page's password DSN, then through the page's
# pg_ident map over the socket, each giving pg_up 1. Its Prometheus configuration passes
# promtool check config. Then the exporter serves every cosid series with the values the
# server has; after a planted renewal failure (the lease table locked against the keeper) the
# failure counter, the failing time and the health series move.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
apt_install_missing prometheus prometheus-postgres-exporter curl
CONTRIB="$COSID_ROOT/contrib/prometheus"
DIR="${1:-/tmp/cosid-e2e}/prometheus"; PORT=28020; EXPORTER_PORT=28021
exporter=""
trap '[ -s "$DIR/exporter.pid" ] && kill "$(cat "$DIR/exporter.pid")" 2>/dev/null; node_stop_all immediate' EXIT
# A port still taken (an exporter left by an earlier run) would answer in this one's place.
if curl -s -o /dev/null "http://127.0.0.1:$EXPORTER_PORT/"; then echo "not ok - port $EXPORTER_PORT is taken"; exit 1; fi

echo "# the rules: promtool check rules, promtool test rules"
check_true "promtool check rules" "$(promtool check rules "$CONTRIB/cosid_alerts.yml" >/dev/null && echo t)"
out=$(cd "$CONTRIB" && promtool test rules cosid_alerts_test.yml 2>&1 || true)
check_true "promtool test rules: every rule's test passes" "$(grep -q SUCCESS <<<"$out" && ! grep -q FAILED <<<"$out" && echo t)"
# every alert of the rules file has a test
rules=$(grep -oP '^\s+- alert: \K\w+' "$CONTRIB/cosid_alerts.yml" | sort -u)
tested=$(grep -oP '^\s+alertname: \K\w+' "$CONTRIB/cosid_alerts_test.yml" | sort -u)
check "every alert rule is unit-tested" "$rules" "$tested"

echo "# docs/monitoring.md's own blocks: the exporter wired as the page says, against a test server"
# The server authenticates as Debian's pg_createcluster writes pg_hba.conf: peer on the socket,
# a password (scram-sha-256) over localhost.
node_up main "$DIR" "$PORT" "cosid.ttl = '3s'" "listen_addresses = 'localhost'" "password_encryption = 'scram-sha-256'"
cat > "$DIR/data/pg_hba.conf" <<'HBA'
local   all             postgres                                peer
local   all             all                                     peer
host    all             all             127.0.0.1/32            scram-sha-256
host    all             all             ::1/128                 scram-sha-256
HBA
: > "$DIR/data/pg_ident.conf"
node_reload main
# (store limits that fit cosid.ttl 3 s, as docs/monitoring.md#floor_raise asks)
q -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_ttl => '3 s', max_tolerance => '1 s')" >/dev/null
q -c "SELECT count(cosid_next()) FROM generate_series(1, 1000)" >/dev/null
# What the test must change in the page's blocks, and nothing else: the system's paths (/etc
# here is $ETC; the cluster's configuration is this server's data directory), its ports and
# its socket directory.
ETC="$DIR/etc"; mkdir -p "$ETC/default" "$ETC/prometheus" "$DIR/bin" "$DIR/steps"
# The exporter runs as Debian's user prometheus, as its service does: it must reach the
# server's socket and this test's /etc under the suite's work directory (mktemp: mode 0700).
d="$DIR"; while [ "$d" != / ] && [ "$d" != /tmp ]; do chmod o+x "$d"; d=$(dirname "$d"); done
substitute() {
    sed -e "s|/etc/postgresql/15/main/|$DIR/data/|g" -e "s|/etc/|$ETC/|g" \
        -e "s|localhost:5432|localhost:$PORT|g" -e "s|localhost:9187|localhost:$EXPORTER_PORT|g" \
        -e "s|host=/var/run/postgresql|host=$DIR port=$PORT|g" "$1"
}
# systemctl restart prometheus-postgres-exporter: Debian's unit (prometheus-postgres-exporter.service:
# User=prometheus, EnvironmentFile=/etc/default/prometheus-postgres-exporter,
# ExecStart=/usr/bin/prometheus-postgres-exporter $ARGS), on this test's port; returns once it listens.
cat > "$DIR/bin/systemctl" <<UNIT
#!/usr/bin/env bash
set -eu
[ "\$*" = "restart prometheus-postgres-exporter" ] || { echo "systemctl \$*: not part of this test" >&2; exit 1; }
if [ -s "$DIR/exporter.pid" ]; then
    old=\$(cat "$DIR/exporter.pid"); kill "\$old" 2>/dev/null || true
    while kill -0 "\$old" 2>/dev/null; do sleep 0.1; done
fi
set -a; . "$ETC/default/prometheus-postgres-exporter"; set +a
setsid setpriv --reuid=prometheus --regid=prometheus --init-groups \\
    /usr/bin/prometheus-postgres-exporter \$ARGS --web.listen-address=127.0.0.1:$EXPORTER_PORT \\
    >>"$DIR/exporter.log" 2>&1 </dev/null &
echo \$! > "$DIR/exporter.pid"
for i in \$(seq 1 200); do curl -s -o /dev/null "http://127.0.0.1:$EXPORTER_PORT/" && exit 0; sleep 0.1; done
echo "the exporter did not listen within 20 s" >&2; exit 1
UNIT
chmod +x "$DIR/bin/systemctl"
steps=$(python3 "$COSID_ROOT/test/meta/doc_blocks.py" --steps "$COSID_ROOT/docs/monitoring.md" "$DIR/steps")
chown -R "$PG_USER" "$DIR/steps"
check_true "monitoring.md has marked sql, file and sh blocks" \
    "$(for k in sql file sh; do awk '{print $2}' <<<"$steps" | grep -qx "$k" || echo no; done | grep -q no && echo f || echo t)"
while read -r file kind arg line; do
    [ -n "$file" ] || continue
    where="monitoring.md:$line"
    case "$kind" in
    sql)
        # (as the reader runs it: psql's own output format, not the shorthand's -At)
        status=0; psql_at "$DIR" "$PORT" postgres -f "$file" > "$file.out" 2>&1 || status=$?
        check "$where: the SQL block runs as postgres without an error" 0 "$status"
        last_sql_out="$file.out" ;;
    output)  # the rows the page shows (abridged: "..."), against the previous SQL block's output
        shown=$(grep -E '^ *[a-z_]+ +\| ' "$file" | awk -F'|' '{gsub(/ /, "", $1); gsub(/ /, "", $2); print $1, $2}' | awk '$1 != "name"')
        check_true "$where: the rows the page shows ($(tr '\n' ' ' <<<"$shown")) are in what PostgreSQL printed" \
            "$([ -n "$shown" ] && while read -r name status; do grep -qE "^ *$name +\| $status +\|" "$last_sql_out" || echo missing; done <<<"$shown" | grep -q missing && echo f || { [ -n "$shown" ] && echo t || echo f; })"
        # and their details, up to what varies (a pid, a time, a count)
        check_true "$where: the details shown for keeper and store are what PostgreSQL printed" \
            "$(grep -qE '^ *keeper +\| ok +\| the keeper \(pid [0-9]+\) serves in database postgres +\|' "$last_sql_out" \
               && grep -qE '^ *store +\| ok +\| the store answered [0-9]+ ms ago; 1 leases held' "$last_sql_out" \
               && grep -qE 'the keeper \(pid [0-9]+\) serves in database postgres' "$file" \
               && grep -qE 'the store answered [0-9]+ ms ago; 1 leases held' "$file" && echo t || echo f)" ;;
    file)
        substitute "$file" > "$ETC/prometheus/$arg" ;;
    sh)
        substitute "$file" > "$file.run"
        status=0
        (cd "$COSID_ROOT" && env PATH="$DIR/bin:$PATH" PGHOST="$DIR" PGPORT="$PORT" bash -e "$file.run") > "$file.out" 2>&1 || status=$?
        check "$where: \`$(head -1 "$file")\` ... runs without an error" 0 "$status"
        [ "$status" = 0 ] || { tail -5 "$file.out"; tail -5 "$DIR/exporter.log"; } | sed 's/^/#   /'
        if grep -q 'curl' "$file"; then  # "pg_up 1 and one cosid_health_status line per check: it works"
            check "$where: the exporter's pg_up is 1 ($(grep -oE 'DATA_SOURCE_NAME=.[a-z]+' "$file" | tail -1 | cut -c19-))" "pg_up 1" "$(grep '^pg_up' "$file.out")"
            check "$where: one cosid_health_status line per check" 14 "$(grep -c '^cosid_health_status{' "$file.out" || true)"
        fi ;;
    *) check "$where: a known kind of block" "sql/output/file/sh" "$kind" ;;
    esac
done <<<"$steps"
# (the page's store_max_ttl block set max_ttl 60 s: limits that fit cosid.ttl 3 s again)
q -c "SELECT cosid_store_settings(max_ttl => '3 s', max_tolerance => '1 s')" >/dev/null
check_true "the exporter ran as the page's DATA_SOURCE_NAME with peer authentication through pg_ident (its last start)" \
    "$(grep -q "^DATA_SOURCE_NAME='host=$DIR port=$PORT dbname=postgres user=cosid_exporter" "$ETC/default/prometheus-postgres-exporter" \
       && grep -q '^cosid_exporter prometheus cosid_exporter' "$DIR/data/pg_ident.conf" && echo t || echo f)"
# shellcheck disable=SC2034  # exporter: not read (the trap reads the pid file)
exporter=$(cat "$DIR/exporter.pid" 2>/dev/null || true)
scrape() { curl -sf "http://127.0.0.1:$EXPORTER_PORT/metrics" >"$DIR/metrics" && cat "$DIR/metrics"; }
# value SERIES [LABELS_REGEX]: the value of the first sample of SERIES whose labels match
value() { scrape | awk -v s="$1" -v l="${2:-}" '$1 ~ "^"s"({|$)" && $1 ~ l {print $2; exit}'; }
has_value() { [ "$(value "$1" "${2:-}")" = "$3" ] && echo t || echo f; }  # has_value SERIES LABELS VALUE
check_true "the exporter serves /metrics" "$(wait_for 20 "exporter up" has_value cosid_keeper_ttl_seconds "" 3)"
check "no query of the file failed" "" "$(grep -i 'error' "$DIR/exporter.log" | grep -i cosid | head -3)"
for s in ids_issued acquires renewals renewal_failures leases_lost duplicate_owner_keys clock_skew_events \
         waits_at_ceiling releases store_transactions store_failovers static_writes static_write_failures \
         leases_freed; do
    check_true "series cosid_${s}_total" "$(grep -q "^cosid_${s}_total" "$DIR/metrics" && echo t)"
done
check_true "cosid_ids_issued_total counts the 1000 ids" "$(awk '$1 ~ /^cosid_ids_issued_total/ {print ($2 >= 1000) ? "t" : "f"}' "$DIR/metrics")"
check "cosid_renewal_failures_total is 0" 0 "$(value cosid_renewal_failures_total)"
check "one cosid_health_status series per check" 14 "$(grep -c '^cosid_health_status{' "$DIR/metrics")"
check "every check 0 (ok) on a healthy server" "" "$(grep '^cosid_health_status{' "$DIR/metrics" | awk '$2 != 0')"
check_true "cosid_keeper_window_left_seconds: the window held has time left, less than 10 s (ttl 3 s)" \
    "$(awk '$1 ~ /^cosid_keeper_window_left_seconds/ {print ($2 > 0 && $2 < 10) ? "t" : "f"}' "$DIR/metrics")"
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
echo "# a store max_ttl far above the keeper's ttl: a failover's raise would pause ids"
check_true "cosid_health_status{check=floor_raise} 1 at max_ttl 60 s and cosid.ttl 3 s" \
    "$(wait_for 20 "floor_raise 1" has_value cosid_health_status 'check="floor_raise"' 1)"
q -c "SELECT cosid_store_settings(max_ttl => '3 s')" >/dev/null
check_true "cosid_health_status{check=floor_raise} 0 at max_ttl 3 s" \
    "$(wait_for 20 "floor_raise 0" has_value cosid_health_status 'check="floor_raise"' 0)"

echo "# a planted renewal failure: the lease table locked against the keeper's renewals"
PGAPPNAME=locker q -c "BEGIN" -c "LOCK TABLE cosid.lease IN EXCLUSIVE MODE" -c "SELECT pg_sleep(120)" >/dev/null 2>&1 &
locker=$!
check_true "cosid_health_status{check=renewals} 2 once the window held has less than ttl/4 left" \
    "$(wait_for 20 "renewals 2" has_value cosid_health_status 'check="renewals"' 2)"
scrape >/dev/null
check_true "cosid_renewal_failures_total counts them" "$(awk '$1 ~ /^cosid_renewal_failures_total/ {print ($2 > 0) ? "t" : "f"}' "$DIR/metrics")"
check_true "cosid_keeper_renewal_failing_seconds above ttl/3" \
    "$(awk '$1 ~ /^cosid_keeper_renewal_failing_seconds/ {print ($2 > 1) ? "t" : "f"}' "$DIR/metrics")"
window_short() { scrape | awk '$1 ~ /^cosid_keeper_window_left_seconds/ {print ($2 < 0.75) ? "t" : "f"; exit}'; }
check_true "cosid_keeper_window_left_seconds falls below ttl/4 while renewals fail (CosidRenewalsFailing)" \
    "$(wait_for 20 "window left under 0.75 s" window_short)"
q -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'locker'" >/dev/null
wait "$locker" 2>/dev/null || true
check_true "renewals succeed again: cosid_keeper_renewal_failing_seconds 0" \
    "$(wait_for 20 "failing 0" has_value cosid_keeper_renewal_failing_seconds "" 0)"
check "cosid_health_status{check=renewals} 0 once renewals succeed again (the failure named in its detail)" 0 "$(value cosid_health_status 'check="renewals"')"
assert_store_verified "$DIR" "$PORT" postgres
exit $FAIL
