#!/usr/bin/env bash
# cosid_health() (issue 25): the checks that need more than the regression server, each
# planted and seen to change: clock skew, the floor raise off with an asynchronous standby
# (and the function on a hot standby), a remote store that stops answering (store,
# renewals), two live incarnations with one owner key seen by a keeper, cosid.database
# without the extension, a keeper that is not running, static slots without a state file
# and with a refused one, and a server without the library preloaded.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/health"
P="$base/p"; SB="$base/standby"; R="$base/r"; K="$base/k"; T="$base/t"; N="$base/n"
PP=28010; PSB=28011; PR=28012; PK=28013; PT=28014; PN=28015
trap 'node_stop_all immediate' EXIT
# status NODE CHECK: the status of one check on that server
status() { node_sql "$1" -c "SELECT status FROM cosid_health() WHERE name = '$2'"; }
is() { [ "$(status "$1" "$2")" = "$3" ] && echo t || echo f; }  # is NODE CHECK STATUS
not_ok() { node_sql "$1" -c "SELECT coalesce(string_agg(name || '=' || status, ' '), '') FROM cosid_health() WHERE status <> 'ok'"; }

echo "# a server with its store: healthy, then its clock off the store's ($SECONDS s)"
node_up p "$P" "$PP" "cosid.ttl = '3s'" "cosid.owner_key = 'p'" "wal_level = replica" "max_wal_senders = 4"
# (store limits that fit cosid.ttl 3 s: with the default max_ttl of 60 s, floor_raise warns that
# a failover would pause ids for about a minute)
qp -c "CREATE EXTENSION cosid" -c "CREATE ROLE watcher LOGIN IN ROLE pg_monitor" \
   -c "SELECT cosid_store_settings(max_ttl => '3 s', max_tolerance => '1 s')" >/dev/null
qp -c "SELECT cosid_next()" >/dev/null
check_true "the keeper serves" "$(wait_for 20 "keeper ok" is p keeper ok)"
check "a healthy server: no warning, no critical row" "" "$(not_ok p)"
qp -c "SELECT cosid_store_settings(max_ttl => '30 s', max_tolerance => '5 s')" >/dev/null  # (the defaults)
check "every check has a row, for a pg_monitor member too" 14 \
    "$(qp -U watcher -c "SELECT count(DISTINCT name) FROM cosid_health()")"
qp -c "ALTER SYSTEM SET cosid.clock_offset = 3000" -c "SELECT pg_reload_conf()" >/dev/null
check_true "clock_skew: 3 s off the store's (tolerance 1 s) is critical" \
    "$(wait_for 20 "clock_skew critical" is p clock_skew critical)"
qp -c "ALTER SYSTEM SET cosid.clock_offset = 600" -c "SELECT pg_reload_conf()" >/dev/null
check_true "clock_skew: 0.6 s off is a warning" "$(wait_for 20 "clock_skew warning" is p clock_skew warning)"
qp -c "ALTER SYSTEM RESET cosid.clock_offset" -c "SELECT pg_reload_conf()" >/dev/null
check_true "clock_skew: ok again once the clocks agree" "$(wait_for 20 "clock_skew ok" is p clock_skew ok)"

echo "# the floor raise switched off while the store has an asynchronous standby ($SECONDS s)"
qp -c "SELECT cosid_store_settings(raise_floors_on_new_timeline => false)" >/dev/null
check "floor_raise: off without a standby is a warning" warning "$(status p floor_raise)"
rm -rf "$SB"; mkdir -p "$SB"; chown "$PG_USER" "$SB"
as_pg "$PG_BIN/pg_basebackup" -h "$P" -p "$PP" -D "$SB/data" -R -X stream -c fast >/dev/null
node_attach sb "$SB" "$PSB"
node_start sb
check_true "floor_raise: off with an asynchronous standby is critical" \
    "$(wait_for 20 "floor_raise critical" is p floor_raise critical)"
check "on the hot standby: the keeper row says it starts at promotion" "ok|hot standby: the keeper starts when this server is promoted" \
    "$(qsb -c "SELECT status || '|' || detail FROM cosid_health() WHERE name = 'keeper'")"
check "on the hot standby: every check has a row" 14 \
    "$(qsb -U watcher -c "SELECT count(*) FROM cosid_health()")"
qp -c "ALTER SYSTEM SET synchronous_standby_names = '*'" -c "SELECT pg_reload_conf()" >/dev/null
check_true "floor_raise: off with every standby synchronous is ok" \
    "$(wait_for 20 "floor_raise ok" is p floor_raise ok)"
qp -c "ALTER SYSTEM RESET synchronous_standby_names" -c "SELECT pg_reload_conf()" \
   -c "SELECT cosid_store_settings(raise_floors_on_new_timeline => true)" >/dev/null
node_stop sb

echo "# a server on a remote store: the store stops answering; another live incarnation with its key ($SECONDS s)"
node_up r "$R" "$PR" "cosid.ttl = '3s'" "cosid.owner_key = 'twin'" \
    "cosid.store_dsn = 'host=$P port=$PP dbname=postgres user=postgres'"
qr -c "CREATE EXTENSION cosid" >/dev/null
# another incarnation with R's owner key holds a live lease in the store
twin_slot=$(qp -c "SELECT slot FROM cosid.acquire('default', 'twin', gen_random_uuid(), 50000)")
qr -c "SELECT cosid_next()" >/dev/null
check_true "owner_key: R's keeper meets another live incarnation with its key: a warning at first" \
    "$(wait_for 20 "owner_key warning on R" is r owner_key warning)"
check_true "owner_key: the store sees two live incarnations of key twin (a warning)" \
    "$(qp -c "SELECT status = 'warning' AND detail LIKE '%twin (2 incarnations)%' FROM cosid_health() WHERE name = 'owner_key'")"
# no lease of a crashed incarnation outlives max_ttl + max_tolerance: with max_ttl 3 s, R's keeper
# is soon older than that, and the other incarnation must be a live server
qp -c "SELECT cosid_store_settings(max_ttl => '3 s')" >/dev/null
check_true "owner_key: critical once R's keeper has run longer than any leftover lease lives" \
    "$(wait_for 30 "owner_key critical on R" is r owner_key critical)"
qp -c "SELECT cosid.revoke('default', $twin_slot)" -c "SELECT cosid_store_settings(max_ttl => '60 s')" >/dev/null
check "owner_key: ok on the store once the other incarnation's lease is gone" ok "$(status p owner_key)"
check_true "owner_key: ok on R at its next look at the store" "$(wait_for 20 "owner_key ok on R" is r owner_key ok)"
check "on R the store's checks are not known here" "ok|not known here: the store is elsewhere (run cosid_health() on it)" \
    "$(qr -c "SELECT status || '|' || detail FROM cosid_health() WHERE name = 'namespace_slots'")"
check "on R the store's limits come from its keeper" ok "$(status r store_max_ttl)"
check "R's store and renewals are ok while the store answers" "ok ok" \
    "$(status r store) $(status r renewals)"
node_stop p
check_true "renewals: critical once the window held has less than ttl/4 left" \
    "$(wait_for 20 "renewals critical" is r renewals critical)"
check_true "store: critical once it has not answered for a ttl" "$(wait_for 20 "store critical" is r store critical)"
node_start p
check_true "store: ok again once it answers" "$(wait_for 20 "store ok" is r store ok)"
check_true "renewals: ok once they succeed again, the failure named in its detail" \
    "$(wait_for 20 "renewals ok" qr -c "SELECT status = 'ok' AND detail LIKE 'a renewal failed % s ago; renewals succeed again' FROM cosid_health() WHERE name = 'renewals'")"
assert_store_verified "$P" "$PP" postgres "P, the store of itself, of R and of the other incarnation"
node_stop r

echo "# cosid.database without the extension; then a keeper that cannot start ($SECONDS s)"
node_up k "$K" "$PK" "cosid.database = 'kdb'"
qk -c "CREATE DATABASE kdb" -c "CREATE EXTENSION cosid" >/dev/null 2>&1
check_true "keeper_database: critical" "$(wait_for 20 "keeper_database critical" is k keeper_database critical)"
check "keeper: critical (it cannot serve)" critical "$(status k keeper)"
node_stop k
sed -i "s/^cosid.database = .*/cosid.database = 'nosuchdb'/" "$K/data/postgresql.conf"
node_start k
check "keeper: critical when it is not running" "critical|the keeper is not running: cosid_next() fails on this server" \
    "$(qk -c "SELECT status || '|' || detail FROM cosid_health() WHERE name = 'keeper'")"
node_stop k

echo "# static slots: without a state file, then with a refused one ($SECONDS s)"
node_up t "$T" "$PT" "cosid.static_slots = '5'" "cosid.state_file = ''"
qt -c "CREATE EXTENSION cosid" >/dev/null
check "static_slots: a warning without a state file" warning "$(status t static_slots)"
node_stop t
echo "not a cosid state file" > "$T/bad.state"; chown "$PG_USER" "$T/bad.state"
sed -i "s|^cosid.state_file = .*|cosid.state_file = '$T/bad.state'|" "$T/data/postgresql.conf"
node_start t
qt -c "SELECT cosid_next()" >/dev/null 2>&1 || true
check_true "static_slots: critical with a refused state file" \
    "$(wait_for 20 "static_slots critical" is t static_slots critical)"
node_stop t

echo "# without the library preloaded: every check, each saying what it cannot know ($SECONDS s)"
node_up n "$N" "$PN"
node_stop n
sed -i "/^shared_preload_libraries = 'cosid'/d" "$N/data/postgresql.conf"
node_start n
qn -c "CREATE EXTENSION cosid" >/dev/null
check "not preloaded: 14 checks, none warning or critical" "14|" \
    "$(qn -c "SELECT count(*) || '|' || coalesce(string_agg(name, ' ') FILTER (WHERE status <> 'ok'), '') FROM cosid_health()")"
check_true "not preloaded: the keeper row says so" \
    "$(qn -c "SELECT detail LIKE 'not known: cosid is not in shared_preload_libraries%' FROM cosid_health() WHERE name = 'keeper'")"
# contrib/prometheus's queries run here too (the counters' and the keeper's come back empty)
apt_install_missing python3-yaml
python3 -c 'import sys, yaml
for k, v in yaml.safe_load(open(sys.argv[1])).items(): print(v["query"].strip().rstrip(";") + ";")' \
    "$COSID_ROOT/contrib/prometheus/cosid_queries.yaml" > "$N/queries.sql"
chmod a+r "$N/queries.sql"
check "not preloaded: every query of cosid_queries.yaml runs" 0 \
    "$(qn -f "$N/queries.sql" >/dev/null 2>"$N/queries.err"; echo $?)"
exit $FAIL
