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
# shellcheck disable=SC2154  # d: the for loop's variable inside the trap string
trap 'for d in "$SB" "$R" "$P" "$K" "$T" "$N"; do stop_server "$d" immediate; done' EXIT
qp() { psql_at "$P" "$PP" postgres -At "$@"; }
qr() { psql_at "$R" "$PR" postgres -At "$@"; }
# status DIR PORT CHECK: the status of one check on that server
status() { psql_at "$1" "$2" postgres -At -c "SELECT status FROM cosid_health() WHERE name = '$3'"; }
is() { [ "$(status "$1" "$2" "$3")" = "$4" ] && echo t || echo f; }  # is DIR PORT CHECK STATUS
not_ok() { psql_at "$1" "$2" postgres -At -c "SELECT coalesce(string_agg(name || '=' || status, ' '), '') FROM cosid_health() WHERE status <> 'ok'"; }

echo "# a server with its store: healthy, then its clock off the store's ($SECONDS s)"
start_server "$P" "$PP" "cosid.ttl = '3s'" "cosid.owner_key = 'p'" "wal_level = replica" "max_wal_senders = 4"
# (store limits that fit cosid.ttl 3 s: with the default max_ttl of 60 s, floor_raise warns that
# a failover would pause ids for about a minute)
qp -c "CREATE EXTENSION cosid" -c "CREATE ROLE watcher LOGIN IN ROLE pg_monitor" \
   -c "SELECT cosid_store_settings(max_ttl => '3 s', max_tolerance => '1 s')" >/dev/null
qp -c "SELECT cosid_next()" >/dev/null
check_true "the keeper serves" "$(wait_for 20 "keeper ok" is "$P" "$PP" keeper ok)"
check "a healthy server: no warning, no critical row" "" "$(not_ok "$P" "$PP")"
qp -c "SELECT cosid_store_settings(max_ttl => '30 s', max_tolerance => '5 s')" >/dev/null  # (the defaults)
check "every check has a row, for a pg_monitor member too" 14 \
    "$(psql_at "$P" "$PP" postgres -At -U watcher -c "SELECT count(DISTINCT name) FROM cosid_health()")"
qp -c "ALTER SYSTEM SET cosid.clock_offset = 3000" -c "SELECT pg_reload_conf()" >/dev/null
check_true "clock_skew: 3 s off the store's (tolerance 1 s) is critical" \
    "$(wait_for 20 "clock_skew critical" is "$P" "$PP" clock_skew critical)"
qp -c "ALTER SYSTEM SET cosid.clock_offset = 600" -c "SELECT pg_reload_conf()" >/dev/null
check_true "clock_skew: 0.6 s off is a warning" "$(wait_for 20 "clock_skew warning" is "$P" "$PP" clock_skew warning)"
qp -c "ALTER SYSTEM RESET cosid.clock_offset" -c "SELECT pg_reload_conf()" >/dev/null
check_true "clock_skew: ok again once the clocks agree" "$(wait_for 20 "clock_skew ok" is "$P" "$PP" clock_skew ok)"

echo "# the floor raise switched off while the store has an asynchronous standby ($SECONDS s)"
qp -c "SELECT cosid_store_settings(raise_floors_on_new_timeline => false)" >/dev/null
check "floor_raise: off without a standby is a warning" warning "$(status "$P" "$PP" floor_raise)"
rm -rf "$SB"; mkdir -p "$SB"; chown "$PG_USER" "$SB"
as_pg "$PG_BIN/pg_basebackup" -h "$P" -p "$PP" -D "$SB/data" -R -X stream -c fast >/dev/null
{ echo "port = $PSB"; echo "unix_socket_directories = '$SB'"; } >> "$SB/data/postgresql.conf"
as_pg "$PG_BIN/pg_ctl" -D "$SB/data" -l "$SB/server.log" -w start >/dev/null
check_true "floor_raise: off with an asynchronous standby is critical" \
    "$(wait_for 20 "floor_raise critical" is "$P" "$PP" floor_raise critical)"
check "on the hot standby: the keeper row says it starts at promotion" "ok|hot standby: the keeper starts when this server is promoted" \
    "$(psql_at "$SB" "$PSB" postgres -At -c "SELECT status || '|' || detail FROM cosid_health() WHERE name = 'keeper'")"
check "on the hot standby: every check has a row" 14 \
    "$(psql_at "$SB" "$PSB" postgres -At -U watcher -c "SELECT count(*) FROM cosid_health()")"
qp -c "ALTER SYSTEM SET synchronous_standby_names = '*'" -c "SELECT pg_reload_conf()" >/dev/null
check_true "floor_raise: off with every standby synchronous is ok" \
    "$(wait_for 20 "floor_raise ok" is "$P" "$PP" floor_raise ok)"
qp -c "ALTER SYSTEM RESET synchronous_standby_names" -c "SELECT pg_reload_conf()" \
   -c "SELECT cosid_store_settings(raise_floors_on_new_timeline => true)" >/dev/null
stop_server "$SB"

echo "# a server on a remote store: the store stops answering; another live incarnation with its key ($SECONDS s)"
start_server "$R" "$PR" "cosid.ttl = '3s'" "cosid.owner_key = 'twin'" \
    "cosid.store_dsn = 'host=$P port=$PP dbname=postgres user=postgres'"
qr -c "CREATE EXTENSION cosid" >/dev/null
# another incarnation with R's owner key holds a live lease in the store
twin_slot=$(qp -c "SELECT slot FROM cosid.acquire('default', 'twin', gen_random_uuid(), 50000)")
qr -c "SELECT cosid_next()" >/dev/null
check_true "owner_key: R's keeper meets another live incarnation with its key: a warning at first" \
    "$(wait_for 20 "owner_key warning on R" is "$R" "$PR" owner_key warning)"
check_true "owner_key: the store sees two live incarnations of key twin (a warning)" \
    "$(qp -c "SELECT status = 'warning' AND detail LIKE '%twin (2 incarnations)%' FROM cosid_health() WHERE name = 'owner_key'")"
# no lease of a crashed incarnation outlives max_ttl + max_tolerance: with max_ttl 3 s, R's keeper
# is soon older than that, and the other incarnation must be a live server
qp -c "SELECT cosid_store_settings(max_ttl => '3 s')" >/dev/null
check_true "owner_key: critical once R's keeper has run longer than any leftover lease lives" \
    "$(wait_for 30 "owner_key critical on R" is "$R" "$PR" owner_key critical)"
qp -c "SELECT cosid.revoke('default', $twin_slot)" -c "SELECT cosid_store_settings(max_ttl => '60 s')" >/dev/null
check "owner_key: ok on the store once the other incarnation's lease is gone" ok "$(status "$P" "$PP" owner_key)"
check_true "owner_key: ok on R at its next look at the store" "$(wait_for 20 "owner_key ok on R" is "$R" "$PR" owner_key ok)"
check "on R the store's checks are not known here" "ok|not known here: the store is elsewhere (run cosid_health() on it)" \
    "$(qr -c "SELECT status || '|' || detail FROM cosid_health() WHERE name = 'namespace_slots'")"
check "on R the store's limits come from its keeper" ok "$(status "$R" "$PR" store_max_ttl)"
check "R's store and renewals are ok while the store answers" "ok ok" \
    "$(status "$R" "$PR" store) $(status "$R" "$PR" renewals)"
stop_server "$P"
check_true "renewals: critical once the window held has less than ttl/4 left" \
    "$(wait_for 20 "renewals critical" is "$R" "$PR" renewals critical)"
check_true "store: critical once it has not answered for a ttl" "$(wait_for 20 "store critical" is "$R" "$PR" store critical)"
as_pg "$PG_BIN/pg_ctl" -D "$P/data" -l "$P/server.log" -w start >/dev/null
check_true "store: ok again once it answers" "$(wait_for 20 "store ok" is "$R" "$PR" store ok)"
check_true "renewals: ok once they succeed again, the failure named in its detail" \
    "$(wait_for 20 "renewals ok" psql_at "$R" "$PR" postgres -At -c "SELECT status = 'ok' AND detail LIKE 'a renewal failed % s ago; renewals succeed again' FROM cosid_health() WHERE name = 'renewals'")"
assert_store_verified "$P" "$PP" postgres "P, the store of itself, of R and of the other incarnation"
stop_server "$R"

echo "# cosid.database without the extension; then a keeper that cannot start ($SECONDS s)"
start_server "$K" "$PK" "cosid.database = 'kdb'"
psql_at "$K" "$PK" postgres -c "CREATE DATABASE kdb" -c "CREATE EXTENSION cosid" >/dev/null 2>&1
check_true "keeper_database: critical" "$(wait_for 20 "keeper_database critical" is "$K" "$PK" keeper_database critical)"
check "keeper: critical (it cannot serve)" critical "$(status "$K" "$PK" keeper)"
stop_server "$K"
sed -i "s/^cosid.database = .*/cosid.database = 'nosuchdb'/" "$K/data/postgresql.conf"
as_pg "$PG_BIN/pg_ctl" -D "$K/data" -l "$K/server.log" -w start >/dev/null
check "keeper: critical when it is not running" "critical|the keeper is not running: cosid_next() fails on this server" \
    "$(psql_at "$K" "$PK" postgres -At -c "SELECT status || '|' || detail FROM cosid_health() WHERE name = 'keeper'")"
stop_server "$K"

echo "# static slots: without a state file, then with a refused one ($SECONDS s)"
start_server "$T" "$PT" "cosid.static_slots = '5'" "cosid.state_file = ''"
psql_at "$T" "$PT" postgres -c "CREATE EXTENSION cosid" >/dev/null
check "static_slots: a warning without a state file" warning "$(status "$T" "$PT" static_slots)"
stop_server "$T"
echo "not a cosid state file" > "$T/bad.state"; chown "$PG_USER" "$T/bad.state"
sed -i "s|^cosid.state_file = .*|cosid.state_file = '$T/bad.state'|" "$T/data/postgresql.conf"
as_pg "$PG_BIN/pg_ctl" -D "$T/data" -l "$T/server.log" -w start >/dev/null
psql_at "$T" "$PT" postgres -c "SELECT cosid_next()" >/dev/null 2>&1 || true
check_true "static_slots: critical with a refused state file" \
    "$(wait_for 20 "static_slots critical" is "$T" "$PT" static_slots critical)"
stop_server "$T"

echo "# without the library preloaded: every check, each saying what it cannot know ($SECONDS s)"
start_server "$N" "$PN"
stop_server "$N"
sed -i "/^shared_preload_libraries = 'cosid'/d" "$N/data/postgresql.conf"
as_pg "$PG_BIN/pg_ctl" -D "$N/data" -l "$N/server.log" -w start >/dev/null
psql_at "$N" "$PN" postgres -c "CREATE EXTENSION cosid" >/dev/null
check "not preloaded: 14 checks, none warning or critical" "14|" \
    "$(psql_at "$N" "$PN" postgres -At -c "SELECT count(*) || '|' || coalesce(string_agg(name, ' ') FILTER (WHERE status <> 'ok'), '') FROM cosid_health()")"
check_true "not preloaded: the keeper row says so" \
    "$(psql_at "$N" "$PN" postgres -At -c "SELECT detail LIKE 'not known: cosid is not in shared_preload_libraries%' FROM cosid_health() WHERE name = 'keeper'")"
# contrib/prometheus's queries run here too (the counters' and the keeper's come back empty)
apt_install_missing python3-yaml
python3 -c 'import sys, yaml
for k, v in yaml.safe_load(open(sys.argv[1])).items(): print(v["query"].strip().rstrip(";") + ";")' \
    "$COSID_ROOT/contrib/prometheus/cosid_queries.yaml" > "$N/queries.sql"
chmod a+r "$N/queries.sql"
check "not preloaded: every query of cosid_queries.yaml runs" 0 \
    "$(psql_at "$N" "$PN" postgres -At -f "$N/queries.sql" >/dev/null 2>"$N/queries.err"; echo $?)"
exit $FAIL
