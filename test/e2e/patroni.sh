#!/usr/bin/env bash
# The store on a two-node Patroni cluster (issue 24).  etcd and two Patroni-managed
# PostgreSQL servers hold the store; instances A and B (plain servers) keep their leases
# there through a multi-host DSN (target_session_attrs=read-write), each with three clients
# inserting.  The leader dies (SIGKILL of its Patroni and of its postmaster with every
# child) and Patroni promotes the replica once the leader key expires.
#   async: asynchronous replication, and the leader's WAL sender frozen until the leader
#          has committed lease changes the replica never got: the promoted store lost them,
#          notices the new timeline and raises every floor (raise_floors_on_new_timeline on).
#   sync:  synchronous_mode: true, the store's defaults (the raise on): first two planned
#          switchovers (patronictl switchover, to n2 and back) during which no client gets
#          an error or waits on cosid (at a ceiling, for a lost lease); then the leader dies
#          and Patroni promotes only its synchronous standby, which holds every committed
#          lease change.
#   issuer: asynchronous, and the members issue ids themselves too (not cosid.store_only;
#          clients insert on the leader through a multi-host DSN): the promoted member's store
#          is a fork of its dead leader's, and the on_role_change callback of docs/failover.md
#          (the page's own block, pointed at the node by PGHOST and PGPORT) acknowledges it
#          (Patroni promoted only after the leader's key expired); every member's own ids and
#          the instances' resume, none issued twice.
# Checks: zero duplicate ids; every id inside a window the store granted to its own
# instance, none inside a window of the other (windows recorded by a trigger on the store,
# read from the new leader and from the dead leader's data directory, started alone
# afterwards); both instances issue again; the time from promotion to each one's first id
# above every ceiling the old leader had granted it.
# The store's limits: cosid's defaults in the sync drill; in the others the ones
# docs/patroni.md shows for a fast asynchronous failover:
#   cosid.ttl 10 s = max_ttl, max_tolerance 1 s, cosid.acquire_timeout 20 s.
# COSID_PATRONI_MODES (default "async sync issuer") picks the drills; COSID_PATRONI_TTL /
# _MAX_TTL / _MAX_TOLERANCE / _ACQUIRE_TIMEOUT (empty: cosid's defaults) measure others;
# COSID_PATRONI_SETTLE (default 3 s) is the time between the sync drill's switchovers and the
# kill (a failover within a ttl of a switchover's raise, when the leases it freed run out).
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/patroni"
[ "$(id -u)" = 0 ] && apt_install_missing patroni etcd-server curl
ETCD_PORT=27001; ETCD_PEER=27002
REST=(27008 27009); PGP=(27010 27011); PA=27020; PB=27021; POLD=27030
A="$base/a"; B="$base/b"
TTL="${COSID_PATRONI_TTL-10s}"; MAX_TTL="${COSID_PATRONI_MAX_TTL-10s}"
MAX_TOL="${COSID_PATRONI_MAX_TOLERANCE-1s}"; ACQ="${COSID_PATRONI_ACQUIRE_TIMEOUT-20s}"
PIDS=(); CLIENT_PIDS=(); stopped=""
# spawn_as_pg LOG CMD...: CMD in the background as the postgres user, its pid in SPAWNED
# and in PIDS (exec all the way down, no fork in between: the test kills Patroni by that pid)
spawn_as_pg() {
    local log=$1; shift
    if [ "$(id -un)" = "$PG_USER" ]; then ( exec "$@" > "$log" 2>&1 ) &
    else ( exec setpriv --reuid="$PG_USER" --regid="$(id -g "$PG_USER")" --init-groups -- env HOME="$base" "$@" > "$log" 2>&1 ) &
    fi
    SPAWNED=$!; PIDS+=($!)
    disown "$SPAWNED"  # (bash would report the SIGKILL the test gives Patroni)
}
cleanup() {
    [ -z "$stopped" ] || kill -CONT $stopped 2>/dev/null || true
    touch "$base/stop" 2>/dev/null || true
    # Patroni first, at once (a Patroni told to stop may still start its server again)
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    for p in "${CLIENT_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    node_stop_all immediate
    wait 2>/dev/null || true
}
trap cleanup EXIT
# The nodes: the members n1 and n2 (qn1, qn2; Patroni makes and runs their servers) and the
# instances a and b (qa, qb), registered here: instance() makes them in the background.
node_register n1 "$base/n1" "${PGP[0]}"; node_register n2 "$base/n2" "${PGP[1]}"
node_register a "$A" "$PA"; node_register b "$B" "$PB"
rest() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:${REST[$1]}/$2"; }
rest_is() { [ "$(rest "$1" "$2")" = 200 ] && echo t || echo f; }   # rest_is NODE ENDPOINT: 200 there
ms_since() { echo $(( $1 - $2 )); }

rm -rf "$base"; mkdir -p "$base"; chown "$PG_USER" "$base"
t_start=$(now_ms)
# docs/patroni.md's blocks, as the page shows them (test/meta/doc_blocks.py --steps): the
# members' patroni.yml, the store's SQL on the leader (step 2), an instance's settings and its
# .pgpass (step 3).
python3 "$COSID_ROOT/test/meta/doc_blocks.py" --steps "$COSID_ROOT/docs/patroni.md" "$base/patroni-steps" > "$base/patroni-steps.txt"
page_block() { awk -v k="$1" -v a="$2" '$2 == k && $3 == a {print $1}' "$base/patroni-steps.txt"; }
chown -R "$PG_USER" "$base/patroni-steps"
# The members authenticate TCP logins with the page's passwords (its pg_hba.conf lines): the
# instances' keepers find theirs in the page's .pgpass lines (pg-1:5432 and pg-2:5432 are
# the members' loopback ports here; instance b's login is keeper_b, as step 2 makes it), the
# test's own clients of the members the superuser's of patroni.yml; one file for every
# process of this test, given by PGPASSFILE.
export PGPASSFILE="$base/pgpass"
{
    sed -e "s/^pg-1:5432:/127.0.0.1:${PGP[0]}:/; s/^pg-2:5432:/127.0.0.1:${PGP[1]}:/" "$(page_block file .pgpass)"
    sed -e "s/^pg-1:5432:/127.0.0.1:${PGP[0]}:/; s/^pg-2:5432:/127.0.0.1:${PGP[1]}:/" \
        -e "s/keeper_a:keeper-a-secret/keeper_b:keeper-b-secret/" "$(page_block file .pgpass)"
    echo "127.0.0.1:*:*:postgres:change-me-1"
} > "$PGPASSFILE"
chown "$PG_USER" "$PGPASSFILE"; chmod 600 "$PGPASSFILE"

# Patroni's custom bootstrap: the template cluster into --datadir
fresh_cluster "$base/template"; rm -rf "$base/template"
cat > "$base/copy_template.sh" <<EOF
#!/bin/sh
for a; do case "\$a" in --datadir=*) d="\${a#--datadir=}";; esac; done
exec cp -a '$INITDB_TEMPLATE' "\$d"
EOF
chmod 755 "$base/copy_template.sh"

# etcd, one member, on loopback (no state of an earlier run: its keys would name a leader)
rm -rf "$base/etcd"
spawn_as_pg "$base/etcd.log" etcd --name e --data-dir "$base/etcd" --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-cluster "e=http://127.0.0.1:$ETCD_PEER"
etcd_up() { curl -s --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"' && echo t; }
check_true "etcd answers" "$(wait_for 30 "etcd's health" etcd_up)"

# patroni_yml MODE NODE: node 0 or 1 of the cluster of drill MODE: docs/patroni.md's
# patroni.yml as the page shows it (test/meta/doc_blocks.py --steps), with only these changed
# for a drill on one machine: the names, addresses and ports (loopback; the page's subnet
# 10.0.0.0/24 in pg_hba becomes 127.0.0.1/32), the directories, Patroni's ttl 10 s,
# loop_wait 2 s and retry_timeout 4 s (a faster detection than the page's 30 s + 10 s: the
# drill's leases follow the page's rule for it), synchronous_mode and cosid.store_only as the
# drill sets them, no watchdog (none on a test machine: the drill kills Patroni and its
# postmaster together, as a watchdog reset would), and the suite's copy of one initdb instead
# of an initdb per node.  As on every server of the suite (server_conf, scripts/lib.sh), the
# members' cosid.test_reach_cap is 1 ms: the issuer drill's fork acknowledgement raises the
# floors over the store's limits, not the 120 s reach cap (which test/e2e/unseen_limits.sh
# tests; with it, A and B waited 110 s of a 120 s deadline for their first id).  The replica's
# base backup takes a fast checkpoint (a spread one took 35 s of a loaded run's setup).
# maximum_lag_on_failover is 64 MB, not the page's 1 MB: the asynchronous drills freeze the
# replica's WAL sender until the leader has committed lease changes it never sends, and on a
# loaded machine the issuer drill's leader wrote more than 1 MB meanwhile (its own clients),
# so Patroni refused to promote.  What the drills show does not depend on the size of the
# loss: the raise covers any.
page_yml="$(page_block file patroni.yml)"
patroni_yml() {
    local mode=$1 i=$2 d="$base/n$(( $2 + 1 ))" sync=false store_only=on callback=""
    [ "$mode" = sync ] && sync=true
    if [ "$mode" = issuer ]; then
        store_only=off   # the members issue ids themselves: a promotion is a fork
        callback="$base/cosid-promoted-$i.sh"
    fi
    python3 - "$page_yml" "$mode" "$i" "$d" "$sync" "$store_only" "$callback" "${TTL:-30s}" "${REST[$i]}" "$ETCD_PORT" \
        "${PGP[$i]}" "$PG_BIN" "$base/copy_template.sh" <<'PY'
import sys, yaml
page, mode, i, d, sync, store_only, callback, ttl, rest, etcd, port, bin_dir, copy = sys.argv[1:]
c = yaml.safe_load(open(page))
c['scope'] = 'cosid-store-' + mode
c['name'] = 'n%d' % (int(i) + 1)
c['log'] = {'level': 'INFO'}
c['restapi'] = {'listen': '127.0.0.1:' + rest, 'connect_address': '127.0.0.1:' + rest}
c['etcd3'] = {'hosts': '127.0.0.1:' + etcd}
dcs = c['bootstrap']['dcs']
dcs.update({'ttl': 10, 'loop_wait': 2, 'retry_timeout': 4, 'synchronous_mode': sync == 'true',
            'maximum_lag_on_failover': 64 * 1024 * 1024})
params = dcs['postgresql']['parameters']
params['cosid.store_only'] = store_only
c['bootstrap']['pg_hba'] = [l.replace('10.0.0.0/24', '127.0.0.1/32') for l in c['bootstrap']['pg_hba']]
c['bootstrap']['method'] = 'copy_template'
c['bootstrap']['copy_template'] = {'command': copy}
pg = c['postgresql']
pg.update({'listen': '127.0.0.1:' + port, 'connect_address': '127.0.0.1:' + port, 'data_dir': d + '/data',
           'bin_dir': bin_dir, 'pgpass': d + '/pgpass'})
pg['parameters'] = {'unix_socket_directories': d, 'max_connections': 40, 'fsync': 'off',
                    'wal_retrieve_retry_interval': '100ms', 'shared_preload_libraries': 'cosid',
                    'cosid.store_only': store_only, 'cosid.test_reach_cap': '1ms'}
pg['basebackup'] = [{'checkpoint': 'fast'}]
if mode == 'issuer':
    pg['parameters']['cosid.ttl'] = ttl  # their own keepers lease within the store's max_ttl
    pg['callbacks'] = {'on_role_change': callback}
c['watchdog'] = {'mode': 'off'}
yaml.safe_dump(c, sys.stdout, sort_keys=False)
PY
}
start_patroni() {  # start_patroni MODE NODE
    local d="$base/n$(( $2 + 1 ))"
    mkdir -p "$d"; chown "$PG_USER" "$d"; chmod 700 "$d"
    # docs/failover.md's callback as the page shows it (test/meta/doc_blocks.py --steps), called
    # through a wrapper that points its psql at this node (PGHOST, PGPORT) and logs what it did
    rm -rf "$base/failover-steps"
    cp "$(python3 "$COSID_ROOT/test/meta/doc_blocks.py" --steps "$COSID_ROOT/docs/failover.md" "$base/failover-steps" \
        | awk '$2 == "file" && $3 == "cosid-promoted" {print $1}')" "$base/cosid-promoted"
    chmod 755 "$base/cosid-promoted"
    cat > "$base/cosid-promoted-$2.sh" <<EOF
#!/bin/sh
PATH='$PG_BIN':"\$PATH" PGHOST='$d' PGPORT=${PGP[$2]} exec '$base/cosid-promoted' "\$@" >> '$d/callback.log' 2>&1
EOF
    chmod 755 "$base/cosid-promoted-$2.sh"
    patroni_yml "$1" "$2" > "$d/patroni.yml"
    spawn_as_pg "$d/patroni.log" patroni "$d/patroni.yml"
    PATRONI_PID[$2]=$SPAWNED
}
in_recovery() { node_sql "n$(( $1 + 1 ))" -c "SELECT pg_is_in_recovery()" 2>/dev/null; }
not_in_recovery() { [ "$(in_recovery "$1")" = f ] && echo t || echo f; }
# the store's lease changes, each with the server's clock, as fault_server records them
record_windows_sql="
CREATE TABLE public.observed (at timestamptz DEFAULT clock_timestamp(), namespace text, slot int, fence bigint,
    incarnation uuid, owner_key text, floor bigint, ceiling bigint, next_floor bigint);
CREATE FUNCTION public.observe_lease() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
    INSERT INTO public.observed(namespace, slot, fence, incarnation, owner_key, floor, ceiling, next_floor)
    VALUES (NEW.namespace, NEW.slot, NEW.fence, NEW.incarnation, NEW.owner_key, NEW.floor, NEW.ceiling, NEW.next_floor);
    RETURN NULL;
END \$\$;
CREATE TRIGGER observe_lease AFTER INSERT OR UPDATE ON cosid.lease FOR EACH ROW EXECUTE FUNCTION public.observe_lease();
ALTER TABLE cosid.lease ENABLE ALWAYS TRIGGER observe_lease;"
observed_copy="COPY (SELECT (extract(epoch FROM at) * 1000)::bigint, slot, fence, owner_key, floor, ceiling
                     FROM observed WHERE namespace = 'ha' AND incarnation IS NOT NULL) TO STDOUT"

# instance NAME DIR PORT: a plain server keeping its leases in the Patroni cluster's store.
# The page's settings of instance a (step 3): the members' loopback ports, instance b's own
# login; then the drill's cosid.ttl and acquire_timeout, which take precedence (later lines).
instance() {
    local name=$1 d=$2 p=$3 extra=() conf=()
    mapfile -t conf < <(sed -e "s/host=pg-1,pg-2 port=5432,5432/host=127.0.0.1,127.0.0.1 port=${PGP[0]},${PGP[1]}/" \
                            -e "s/user=keeper_a /user=keeper_$name /" "$(page_block conf postgresql.conf)")
    [ -n "$TTL" ] && extra+=("cosid.ttl = '$TTL'")
    [ -n "$ACQ" ] && extra+=("cosid.acquire_timeout = '$ACQ'")
    node_up "$name" "$d" "$p" "${conf[@]}" "cosid.owner_key = '$name'" "cosid.namespace = 'ha'" \
        "cosid.pool_idle_timeout = '1h'" "${extra[@]}"
    node_sql "$name" -q -c "CREATE EXTENSION cosid" \
        -c "CREATE TABLE t (id bigint PRIMARY KEY DEFAULT cosid_next(), client int, at timestamptz DEFAULT clock_timestamp())" \
        -c "CREATE TABLE other (id bigint, client int, at timestamptz)" \
        -c "CREATE TABLE win (src text, at_ms bigint, slot int, fence bigint, owner_key text, floor bigint, ceiling bigint)" >/dev/null
    mkdir -p "$d/clients"; chown "$PG_USER" "$d/clients"
}
# The clients' pause after each committed statement: 0.3 s, not check.sh's 0.1 s.  Each of
# them connects for every statement (a setpriv, a psql and a backend each time), and at 0.1 s
# the eight of them were two thirds of this script's CPU, which the other lanes need; three
# statements a second each still commit through every switchover and failover.
PATRONI_PACE=${PATRONI_PACE:-0.3}
# clients NODE N: N clients inserting 20 rows per statement (one connection each
# statement), each logging "ms ok" or "ms SQLSTATE", until $base/stop.
clients() {
    local n=$1 d c; d=$(node_dir "$1")
    for c in $(seq 1 "$2"); do
        (
            trap - EXIT; set +e
            while [ ! -e "$base/stop" ]; do
                if out=$(node_sql "$n" -v VERBOSITY=sqlstate \
                      -c "INSERT INTO t(client) SELECT $c FROM generate_series(1, 20)" 2>&1); then
                    echo "$(now_ms) ok"; sleep "$PATRONI_PACE"; else
                    code=$(sqlstate_of "$out")
                    echo "$(now_ms) ${code:-conn}"; sleep 0.05; fi
            done > "$d/clients/$c.log"
        ) &
        CLIENT_PIDS+=($!)
    done
}
# node_clients N: N clients inserting into tn on whichever member is writable (the members
# issue ids themselves in drill issuer), logging as clients() does, in $base/nodeclients.
node_clients() {
    local c dsn="host=127.0.0.1,127.0.0.1 port=${PGP[0]},${PGP[1]} dbname=postgres user=postgres target_session_attrs=read-write connect_timeout=2"
    mkdir -p "$base/nodeclients"; chown "$PG_USER" "$base/nodeclients"
    for c in $(seq 1 "$1"); do
        (
            trap - EXIT; set +e
            while [ ! -e "$base/stop" ]; do
                if out=$(as_pg "$PG_BIN/psql" -X -q -d "$dsn" -v VERBOSITY=sqlstate \
                      -c "INSERT INTO tn(at) SELECT clock_timestamp() FROM generate_series(1, 20)" 2>&1); then
                    echo "$(now_ms) ok"; sleep "$PATRONI_PACE"; else
                    code=$(sqlstate_of "$out")
                    echo "$(now_ms) ${code:-conn}"; sleep 0.05; fi
            done > "$base/nodeclients/$c.log"
        ) &
        CLIENT_PIDS+=($!)
    done
}
# switchover FROM TO: a planned switchover of the store (patronictl), from node FROM to node TO;
# "t" once TO leads and FROM streams from it again.
switchover() {
    local from=$1 to=$2
    # with synchronous_mode Patroni switches over only to its synchronous standby
    if [ "$mode" = sync ] && [ "$(wait_for 90 "n$(( to + 1 )) as the synchronous standby" rest_is "$to" sync)" != t ]; then
        echo f; return
    fi
    patronictl -c "$base/n$(( from + 1 ))/patroni.yml" switchover "cosid-store-$mode" --leader "n$(( from + 1 ))" \
        --candidate "n$(( to + 1 ))" --force > "$base/switchover-$to.log" 2>&1 || { sed 's/^/#   /' "$base/switchover-$to.log" >&2; echo f; return; }
    if [ "$(wait_for 60 "n$(( to + 1 )) as Patroni's leader" rest_is "$to" primary)" != t ]; then
        sed 's/^/#   patronictl: /' "$base/switchover-$to.log" >&2; echo f; return
    fi
    wait_for 90 "n$(( from + 1 )) streaming from n$(( to + 1 ))" node_sql "n$(( to + 1 ))" -c "
        SELECT count(*) = 1 FROM pg_stat_replication WHERE state = 'streaming' AND application_name = 'n$(( from + 1 ))'"
}
# window_report DIR FROM TO: the longest time (ms) between two committed inserts of an
# instance's clients that falls within FROM..TO, and their errors there ("ms errors").
window_report() {
    local gap errs
    gap=$(cat "$1"/clients/*.log | awk '$2 == "ok" {print $1}' | sort -n |
          awk -v f="$2" -v t="$3" '$1 >= f && p >= f - 5000 && $1 - p > g {g = $1 - p} {p = $1} $1 > t {exit} END {print g + 0}')
    errs=$(cat "$1"/clients/*.log | awk -v f="$2" -v t="$3" '$2 != "ok" && $1 >= f && $1 <= t' | wc -l)
    echo "$gap $errs"
}
inserted() { [ "$(cat "$1"/clients/*.log 2>/dev/null | grep -c ' ok$')" -gt 2 ] && echo t || echo f; }
both_insert() { [ "$(inserted "$A")" = t ] && inserted "$B"; }
# cosid_waits Q: "waits at a ceiling, leases lost" of an instance (cosid_stats())
declare -A WAITS0=()
cosid_waits() { "$1" -c "SELECT waits_at_ceiling || ' ' || leases_lost FROM cosid_stats()"; }
gone() { ! kill -0 "$1" 2>/dev/null && ! pgrep -P "$1" >/dev/null && echo t || echo f; }

drill() {
    local mode=$1 t0; t0=$(now_ms)
    # The sync drill runs with cosid's defaults, which a switchover and a failover to the
    # synchronous standby must cost no pause with (their lease, 30 s, outlasts Patroni's
    # detection here: ttl 10 s + loop_wait 2 s < 2/3 x 30 s + tolerance); the others with the
    # page's fast-failover profile, unless COSID_PATRONI_TTL says otherwise.
    local TTL=$TTL MAX_TTL=$MAX_TTL MAX_TOL=$MAX_TOL ACQ=$ACQ
    # (cosid's defaults, said explicitly: the page's step 2 and 3 set 60 s; max_tolerance
    # stays the store's default, 5 s)
    if [ "$mode" = sync ] && [ -z "${COSID_PATRONI_TTL+x}" ]; then TTL=30s; MAX_TTL=30s; MAX_TOL=""; ACQ=30s; fi
    echo "# drill $mode (cosid.ttl ${TTL:-default}, max_ttl ${MAX_TTL:-default}, max_tolerance ${MAX_TOL:-default})"
    rm -rf "$base/n1" "$base/n2" "$base/old" "$base/stop" "$base/nodeclients"
    start_patroni "$mode" 0
    check_true "[$mode] n1 bootstraps and leads" "$(wait_for 90 "n1 as Patroni's leader" rest_is 0 primary)"
    # the store, on the leader (before the replica exists: its base backup has it): one
    # login role per instance, the recommended limits
    local limits=()
    [ -n "$MAX_TTL" ] && limits+=("max_ttl => '$MAX_TTL'")
    [ -n "$MAX_TOL" ] && limits+=("max_tolerance => '$MAX_TOL'")
    # the page's step 2 as written (its roles and passwords, its max_ttl), then the drill's
    # namespace and limits
    local status=0
    qn1 -f "$(page_block sql -)" > "$base/step2.out" 2>&1 || status=$?
    check "[$mode] docs/patroni.md step 2 runs on the leader as written" 0 "$status"
    qn1 -c "SELECT cosid_namespace_create('ha', slot_bits => 4, tolerance => '${MAX_TOL:-1s}')" >/dev/null
    [ "${#limits[@]}" -eq 0 ] || qn1 -c "SELECT cosid_store_settings($(IFS=,; echo "${limits[*]}"))" >/dev/null
    qn1 -c "$record_windows_sql" >/dev/null
    [ "$mode" = issuer ] && qn1 -c "CREATE TABLE tn (id bigint PRIMARY KEY DEFAULT cosid_next('ha'),
                                                         at timestamptz DEFAULT clock_timestamp())" >/dev/null
    # the replica and the instances start together
    start_patroni "$mode" 1
    instance a "$A" "$PA" & local ia=$!
    instance b "$B" "$PB" & local ib=$!
    check_true "[$mode] n2 runs as a streaming replica" "$(wait_for 90 "n2 as a streaming replica" qn1 -c "
        SELECT count(*) = 1 FROM pg_stat_replication WHERE state = 'streaming' AND application_name = 'n2'")"
    if [ "$mode" = sync ]; then
        check_true "[sync] Patroni made n2 the synchronous standby" "$(wait_for 30 "n2 in /sync" rest_is 1 sync)"
    fi
    wait "$ia" && wait "$ib" || { echo "not ok - [$mode] the instances start"; FAIL=1; return; }
    echo "# [$mode] store cluster and instances ready after $(( ($(now_ms) - t0) / 1000 )) s"
    clients a 3; clients b 3
    [ "$mode" = issuer ] && node_clients 2
    check_true "[$mode] both instances insert" "$(wait_for 60 "rows on A and B" both_insert)"
    [ "$mode" = issuer ] && check_true "[issuer] the leader issues ids itself" \
        "$(wait_for 60 "rows in tn on the leader" qn1 -c "SELECT count(*) > 100 FROM tn")"
    if [ "$mode" = sync ]; then
        # Two planned switchovers, to n2 and back, with the store's raise on (the default):
        # nothing was lost, and the instances go on without an error or a pause.
        local t_sw t_back t_end r
        # What would make a client wait on cosid: a window run out before its renewal or its
        # successor came (a wait at its ceiling), or a lease lost (a wait for a new one).  A
        # lease the raise frees is not one: its window goes on to its ceiling while the
        # successor is acquired.  Counted on each instance from here to the end of the drill:
        # none may happen.  (The longest time without a committed insert is printed, not
        # checked: on a loaded machine it measures the CPU the clients got.)
        WAITS0[a]=$(cosid_waits qa); WAITS0[b]=$(cosid_waits qb)
        t_sw=$(now_ms)
        check_true "[sync] a planned switchover to n2 (patronictl switchover)" "$(switchover 0 1)"
        t_back=$(now_ms)
        check_true "[sync] and back to n1" "$(switchover 1 0)"
        check_true "[sync] n2 is the synchronous standby again" "$(wait_for 60 "n2 in /sync" rest_is 1 sync)"
        local settle_s=${COSID_PATRONI_SETTLE:-3}
        t_end=$(( $(now_ms) + settle_s * 1000 ))
        check_true "[sync] both instances insert after the switchovers" \
            "$(wait_for $(( settle_s + 30 )) "${settle_s} s of inserts after the switchovers" clock_past "$t_end")"
        for s in a b; do
            # shellcheck disable=SC2207  # the report's words, one element each
            r=($(window_report "$([ $s = a ] && echo "$A" || echo "$B")" "$t_sw" "$t_end"))
            echo "# [sync] ${s^^} during the switchovers ($(( t_back - t_sw )) ms and $(( t_end - settle_s * 1000 - t_back )) ms): longest time without a committed insert ${r[0]} ms, errors ${r[1]}"
            check "[sync] no client error on ${s^^} during the switchovers" 0 "${r[1]}"
            check "[sync] no wait on cosid in ${s^^} during the switchovers (waits at a ceiling, leases lost)" \
                "${WAITS0[$s]}" "$(cosid_waits "q$s")"
        done
        check "[sync] the store raised its floors at each switchover" 2 \
            "$(qn1 -c "SELECT failovers FROM cosid.store_state")"
    fi
    local pm; pm=$(head -1 "$base/n1/data/postmaster.pid")
    if [ "$mode" != sync ]; then
        # The replica stops receiving while the leader goes on granting and renewing: the
        # leader dies with lease changes the replica never saw (a few kB: well inside
        # maximum_lag_on_failover, so Patroni promotes all the same).
        local ws t_freeze
        check_true "[async] the replica streams" "$(wait_for 30 "n2 streaming" qn1 -c "
            SELECT count(*) = 1 FROM pg_stat_replication WHERE state = 'streaming' AND application_name = 'n2'")"
        ws=$(qn1 -c "SELECT pid FROM pg_stat_replication WHERE state = 'streaming' AND application_name = 'n2'")
        t_freeze=$(qn1 -c "SELECT clock_timestamp()")
        kill -STOP $ws; stopped="$ws"
        check_true "[async] the leader commits lease changes its replica does not receive" \
            "$(wait_for 30 "3 lease changes on the leader after its WAL sender froze" qn1 -c "
                SELECT count(*) >= 3 FROM observed WHERE at > '$t_freeze'")"
    fi
    local t_kill; t_kill=$(now_ms)
    kill -9 "${PATRONI_PID[0]}" "$pm" $(pgrep -P "$pm") 2>/dev/null || true
    [ -z "$stopped" ] || kill -CONT $stopped 2>/dev/null || true; stopped=""
    # the moment n2 leaves recovery, taken by a poller of its own (the test reads the dead
    # leader's data directory meanwhile)
    rm -f "$base/promoted"
    ( trap - EXIT; [ "$(wait_until 90 not_in_recovery 1)" = t ] && now_ms > "$base/promoted" ) &
    local poller=$!
    echo "# [$mode] leader n1 killed (Patroni and postmaster)"
    # the dead leader's last word: its data directory, started alone where nobody connects
    { wait "${PATRONI_PID[0]}"; } 2>/dev/null || true   # (quiet: bash reports the SIGKILL)
    wait_for 20 "n1's processes to end" gone "$pm" >/dev/null
    mkdir -p "$base/old"; chown "$PG_USER" "$base/old"
    # (n1's data directory under another port and socket, its log elsewhere: no node, which
    # binds one directory to all three)
    as_pg "$PG_BIN/pg_ctl" -D "$base/n1/data" -l "$base/old/server.log" -w start -o \
        "-c port=$POLD -c listen_addresses='' -c unix_socket_directories='$base/old' -c shared_preload_libraries='' -c synchronous_standby_names='' -c archive_mode=off" >/dev/null 2>&1
    as_pg "$PG_BIN/psql" -X -q -At -h "$base/old" -p "$POLD" -d postgres -c "$observed_copy" > "$base/old.tsv"
    [ "$mode" = issuer ] && as_pg "$PG_BIN/psql" -X -q -At -h "$base/old" -p "$POLD" -d postgres \
        -c "COPY (SELECT id, at FROM tn) TO STDOUT" > "$base/old_tn.tsv"
    as_pg "$PG_BIN/pg_ctl" -D "$base/n1/data" -m immediate -w stop >/dev/null
    check_true "[$mode] the dead leader's record of windows was read" "$([ -s "$base/old.tsv" ] && echo t || echo f)"
    # Patroni promotes n2 once the leader key has expired
    wait "$poller" || true
    check_true "[$mode] Patroni promotes n2" "$([ -s "$base/promoted" ] && echo t || echo f)"
    # the promotion's moment: when n2 wrote its new timeline's history file (the poller, on
    # a loaded machine, sees it seconds late)
    local t_promote hist; hist=$(ls "$base"/n2/data/pg_wal/*.history 2>/dev/null | tail -1)
    t_promote=$(stat -c %.3Y "$hist" 2>/dev/null | tr -d .)
    [ -n "$t_promote" ] || t_promote=$(cat "$base/promoted")
    echo "# [$mode] the poller saw n2 promoted $(( $(cat "$base/promoted") - t_promote )) ms after its history file was written"
    echo "# [$mode] n2 promoted $(( t_promote - t_kill )) ms after the kill"
    check_true "[$mode] n2 is Patroni's leader" "$(wait_for 30 "n2 as Patroni's leader" rest_is 1 primary)"
    if [ "$mode" = issuer ]; then
        check_true "[issuer] Patroni's on_role_change callback acknowledged the fork on n2" \
            "$(wait_for 60 "the callback's acknowledgement" bash -c "grep -q 'fork acknowledged' '$base/n2/callback.log' 2>/dev/null && echo t")"
        sed 's/^/# callback: /' "$base/n2/callback.log" 2>/dev/null
        check "[issuer] cosid_health() on n2: fork ok" ok "$(qn2 -c "SELECT status FROM cosid_health() WHERE name = 'fork'")"
        check_true "[issuer] the members' own clients issue again, on n2" \
            "$(wait_for 120 "new rows in tn on n2" qn2 -c "SELECT count(*) > 0 FROM tn WHERE at > to_timestamp($t_promote / 1000.0)")"
    fi
    # the ceilings the old leader granted each instance: an id above them is from a window
    # the new leader granted or renewed
    local c_a c_b
    c_a=$(awk -F'\t' '$4 == "a" {print $6}' "$base/old.tsv" | sort -n | tail -1)
    c_b=$(awk -F'\t' '$4 == "b" {print $6}' "$base/old.tsv" | sort -n | tail -1)
    above() { "$1" -c "SELECT count(*) > 0 FROM t, cosid_parse(t.id, 'ha') p WHERE (extract(epoch FROM p.ts) * 1000)::bigint > $2"; }
    check_true "[$mode] A issues again, above every ceiling the old leader granted it" "$(wait_for 120 "an id on A above $c_a" above qa "$c_a")"
    check_true "[$mode] B issues again, above every ceiling the old leader granted it" "$(wait_for 120 "an id on B above $c_b" above qb "$c_b")"
    touch "$base/stop"
    wait "${CLIENT_PIDS[@]}" 2>/dev/null || true; CLIENT_PIDS=()
    for s in a b; do
        local q=q$s c=c_$s d; d=$([ $s = a ] && echo "$A" || echo "$B")
        local first_new first_any gap errs
        first_new=$($q -c "SELECT (extract(epoch FROM min(at)) * 1000)::bigint FROM t, cosid_parse(t.id, 'ha') p
                           WHERE (extract(epoch FROM p.ts) * 1000)::bigint > ${!c}")
        first_any=$(cat "$d"/clients/*.log | awk -v t="$t_promote" '$2 == "ok" && $1 >= t {print $1}' | sort -n | awk 'NR == 1')  # (not head: with pipefail, sort's SIGPIPE would end the script)
        gap=$(cat "$d"/clients/*.log | awk '$2 == "ok" {print $1}' | sort -n | awk 'NR > 1 && $1 - p > g {g = $1 - p} {p = $1} END {print g + 0}')
        errs=$(cat "$d"/clients/*.log | awk '$2 != "ok" {print $2}' | sort | uniq -c | tr -s ' \n' ' ')
        echo "# [$mode] ${s^^}: first id above the old leader's ceilings $(( first_new - t_promote )) ms after the promotion" \
             "($(( first_new - t_kill )) ms after the kill); first insert committed after the promotion" \
             "$(( ${first_any:-$t_promote} - t_promote )) ms after it; longest time without a committed insert $gap ms; errors:${errs:- none}"
        echo "# [$mode] ${s^^}'s keeper: $($q -c "SELECT 'store failovers seen ' || store_failovers || ', leases lost ' || leases_lost || ', freed ' || leases_freed || ', renewal failures ' || renewal_failures FROM cosid_stats()")"
        if [ "$mode" = sync ]; then
            # nothing was lost: the failover to the synchronous standby costs what a
            # renewed lease rides out
            check "[sync] no client error on ${s^^} over the switchovers and the failover" "" "${errs}"
            check "[sync] no wait on cosid in ${s^^} over the switchovers and the failover (waits at a ceiling, leases lost)" \
                "${WAITS0[$s]}" "$(cosid_waits "$q")"
        fi
    done
    [ "$mode" = async ] && check "[async] no client of A or B lost its lease to the raise (ZC001)" 0 \
        "$(cat "$A"/clients/*.log "$B"/clients/*.log | grep -c ' ZC001$' || true)"
    final "$mode"
    if [ "$mode" = issuer ]; then
        qn2 -c "CREATE TABLE old_tn (id bigint, at timestamptz)" >/dev/null
        qn2 -c "COPY old_tn FROM STDIN" < "$base/old_tn.tsv"
        check "[issuer] ids issued by both the dead leader and n2 ($(wc -l < "$base/old_tn.tsv") of the leader's, $(qn2 -c "SELECT count(*) FROM tn WHERE at > to_timestamp($t_promote / 1000.0)") of n2's)" 0 \
            "$(qn2 -c "SELECT count(*) FROM tn JOIN old_tn o USING (id) WHERE tn.at <> o.at")"
        check "[issuer] no unique violation (23505) in the members' clients" 0 "$(cat "$base"/nodeclients/*.log | grep -c ' 23505' || true)"
        echo "# [issuer] the members' clients: errors $(cat "$base"/nodeclients/*.log | awk '$2 != "ok" {print $2}' | sort | uniq -c | tr -s ' \n' ' ')"
    fi
    # the next drill starts from nothing
    kill -9 "${PATRONI_PID[1]}" 2>/dev/null || true; { wait "${PATRONI_PID[1]}"; } 2>/dev/null || true
    node_stop a immediate; node_stop b immediate; node_stop n2 immediate
    echo "# [$mode] drill took $(( ($(now_ms) - t0) / 1000 )) s"
}

# final MODE: every id of A and B against the windows both leaders recorded.
final() {
    local mode=$1
    qn2 -c "$observed_copy" > "$base/new.tsv"
    local lost; lost=$(sort "$base/old.tsv" | comm -23 - <(sort "$base/new.tsv") | wc -l)
    echo "# [$mode] lease changes the old leader committed that the new one never got: $lost"
    if [ "$mode" = sync ]; then
        check "[sync] the promoted synchronous standby holds every committed lease change" 0 "$lost"
    else
        check_true "[async] the failover lost lease changes (the drill is an asynchronous loss)" "$([ "$lost" -gt 0 ] && echo t || echo f)"
        check_true "[async] the new leader raised the floors on its new timeline" \
            "$(qn2 -c "SELECT failovers >= 1 AND raise_floors_on_new_timeline FROM cosid.store_state")"
    fi
    qb -c "COPY t(id, client, at) TO STDOUT" | qa -c "TRUNCATE other" -c "COPY other FROM STDIN"
    { sed 's/^/old\t/' "$base/old.tsv"; sed 's/^/new\t/' "$base/new.tsv"; } | qa -c "TRUNCATE win" -c "COPY win FROM STDIN"
    check "[$mode] zero duplicate ids within and across A and B over $(qa -c "SELECT (SELECT count(*) FROM t) + (SELECT count(*) FROM other)") rows" 0 \
        "$(qa -c "SELECT (SELECT count(*) FROM (SELECT id FROM t UNION ALL SELECT id FROM other) x) - (SELECT count(DISTINCT id) FROM (SELECT id FROM t UNION ALL SELECT id FROM other) x)")"
    check "[$mode] cosid_health() on the store's leader: store_max_ttl ok (its own cosid.ttl does not count where it only serves the store)" ok \
        "$(qn2 -c "SELECT status FROM cosid_health() WHERE name = 'store_max_ttl'")"
    check "[$mode] no unique violation (23505) in any client" 0 "$(cat "$A"/clients/*.log "$B"/clients/*.log | grep -c ' 23505' || true)"
    local ids="WITH w AS (SELECT src, slot, fence, owner_key, min(floor) AS floor, max(ceiling) AS ceiling FROM win GROUP BY 1, 2, 3, 4),
                    ids AS (SELECT 'a' AS owner, p.slot, (extract(epoch FROM p.ts) * 1000)::bigint AS ts FROM t, cosid_parse(t.id, 'ha') p
                            UNION ALL
                            SELECT 'b', p.slot, (extract(epoch FROM p.ts) * 1000)::bigint FROM other, cosid_parse(other.id, 'ha') p)"
    check "[$mode] every id inside a window the store granted to its own instance" 0 "$(qa -c "$ids
        SELECT count(*) FROM ids WHERE NOT EXISTS (SELECT 1 FROM w WHERE w.owner_key = ids.owner AND w.slot = ids.slot
                                                   AND ids.ts > w.floor AND ids.ts <= w.ceiling)")"
    check "[$mode] no id of one instance inside a window of the other" 0 "$(qa -c "$ids
        SELECT count(*) FROM ids WHERE EXISTS (SELECT 1 FROM w WHERE w.owner_key <> ids.owner AND w.slot = ids.slot
                                               AND ids.ts > w.floor AND ids.ts <= w.ceiling)")"
    check "[$mode] windows of different owners never overlap on a slot" 0 "$(qa -c "
        WITH w AS (SELECT src, slot, fence, owner_key, min(floor) AS floor, max(ceiling) AS ceiling FROM win GROUP BY 1, 2, 3, 4)
        SELECT count(*) FROM w x JOIN w y ON x.slot = y.slot AND x.owner_key < y.owner_key
        WHERE x.floor < y.ceiling AND y.floor < x.ceiling")"
    # the store's own history on the new leader (in async, without the tail the failover lost)
    assert_store_verified 127.0.0.1 "${PGP[1]}" postgres "[$mode] the promoted leader's store"
}

for mode in ${COSID_PATRONI_MODES:-async sync issuer}; do drill "$mode"; done
echo "# patroni.sh took $(( ($(now_ms) - t_start) / 1000 )) s"
exit $FAIL
