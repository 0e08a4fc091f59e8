# shellcheck shell=bash
# The end-to-end tests' servers, in the manner of PostgreSQL's PostgreSQL::Test::Cluster: a
# node is a name bound to a data directory, a port and a bin directory, and one set of
# functions makes, starts, stops, queries and waits on it.  Sourced by test/lib/check.sh, so
# every end-to-end script has it.
#
#   node_init NAME DIR PORT [LINE...]   a fresh cluster in DIR/data with cosid preloaded and
#                                       LINEs added to its postgresql.conf (scripts/lib.sh's
#                                       start_server settings); not started
#   node_up NAME DIR PORT [LINE...]     node_init, then node_start
#   node_register NAME DIR PORT        a node for a server something else makes and runs
#                                       (Patroni, pg_upgrade): sql, wait and the rest
#   node_attach NAME DIR PORT [LINE...] a node for a data directory made otherwise (a base
#                                       backup, a copy): its port and socket set, LINEs added
#   node_standby NAME DIR PORT FROM SLOT
#                                       a streaming standby of node FROM (pg_basebackup -R
#                                       through replication slot SLOT), started; returns once
#                                       FROM shows it streaming (at most 20 s)
#   node_streams FROM SLOT              "t" while FROM streams to a standby through SLOT
#   node_start NAME [pg_ctl -o OPTIONS] starts it and waits until it accepts connections
#   node_stop NAME [MODE]               fast (default), immediate or smart; quiet when it is down
#   node_restart NAME [MODE]            stop, then start
#   node_promote NAME                   a standby promoted, waited for
#   node_reload NAME                    pg_ctl reload (its configuration files read again)
#   node_sql NAME [psql args...]        psql -At on the node's database (NODE_DB[NAME], else
#                                       postgres), stopping at the first error
#   node_sql_db NAME DB [psql args...]  the same on database DB
#   node_wait NAME SECONDS SQL          until SQL returns t, at most SECONDS ("t" or "f")
#   node_dir / node_port / node_log / node_bin NAME
#   node_dsn NAME [DB] [USER]           a libpq connection string to it
#   node_pid NAME                       its postmaster's pid ("" when it is down)
#   node_stop_all [MODE]                every node, in reverse order of creation (for a trap)
#
# A node's shorthand: node_init defines qNAME (qa for node a) as node_sql NAME; the node named
# main is q.  The bin directory is PG_BIN when the node is made (COSID_PG_BIN, or another
# major's, for a node of that major).  Make a node in the script's own shell, not inside $(...):
# a subshell's node is gone when it ends.
declare -gA NODE_DIR=() NODE_PORT=() NODE_BIN=() NODE_DB=()
declare -ga NODE_NAMES=()

node_register() {
    local name="$1"
    [[ "$name" =~ ^[a-z][a-z0-9_]*$ ]] || { echo "node: bad node name '$name'" >&2; return 1; }
    NODE_DIR[$name]="$2"; NODE_PORT[$name]="$3"; NODE_BIN[$name]="$PG_BIN"
    local n
    for n in "${NODE_NAMES[@]}"; do [ "$n" = "$name" ] && return 0; done
    NODE_NAMES+=("$name")
    local fn="q$name"; [ "$name" = main ] && fn=q
    eval "$fn() { node_sql $name \"\$@\"; }"
}

node_init() {
    local name="$1" dir="$2" port="$3"; shift 3
    node_register "$name" "$dir" "$port"
    node_stop "$name" immediate  # a server a killed run left behind
    rm -rf "$dir"; mkdir -p "$dir"; chown "$PG_USER" "$dir"
    fresh_cluster "$dir/data"
    server_conf "$dir" "$port" "$@" >> "$dir/data/postgresql.conf"
}

node_up() { node_init "$@"; node_start "$1"; }

node_attach() {
    local name="$1" dir="$2" port="$3" line; shift 3
    node_register "$name" "$dir" "$port"
    chown -R "$PG_USER" "$dir"
    {
        echo "port = $port"
        echo "unix_socket_directories = '$dir'"
        for line in "$@"; do echo "$line"; done
    } >> "$dir/data/postgresql.conf"
}

# (The standby retries WAL every 100 ms: a promotion while its startup process sleeps between
# retries, 5 s by default, waits for that sleep on a loaded machine.)
node_standby() {
    local name="$1" dir="$2" port="$3" from="$4" slot="$5"
    node_register "$name" "$dir" "$port"
    node_stop "$name" immediate
    rm -rf "$dir"; mkdir -p "$dir"; chown "$PG_USER" "$dir"
    as_pg "${NODE_BIN[$from]}/pg_basebackup" -h "${NODE_DIR[$from]}" -p "${NODE_PORT[$from]}" -D "$dir/data" -R \
        -X stream -S "$slot" -c fast >/dev/null
    node_attach "$name" "$dir" "$port" "wal_retrieve_retry_interval = '100ms'"
    node_start "$name"
    wait_until 20 node_streams "$from" "$slot" >/dev/null
}

node_streams() {
    node_sql "$1" -c "SELECT count(*) = 1 FROM pg_stat_replication r JOIN pg_replication_slots s ON s.active_pid = r.pid
                      WHERE s.slot_name = '$2' AND r.state = 'streaming'"
}

node_start() {
    local name="$1"; shift
    as_pg "${NODE_BIN[$name]}/pg_ctl" -D "${NODE_DIR[$name]}/data" -l "${NODE_DIR[$name]}/server.log" -w "$@" start >/dev/null
}

node_stop() {
    local name="$1" mode="${2:-fast}"
    # (a node not made yet, or down: nothing to stop)
    [ -n "${NODE_DIR[$name]:-}" ] && [ -f "${NODE_DIR[$name]}/data/postmaster.pid" ] || return 0
    as_pg "${NODE_BIN[$name]}/pg_ctl" -D "${NODE_DIR[$name]}/data" -m "$mode" -w stop >/dev/null 2>&1 || true
}

node_restart() { node_stop "$1" "${2:-fast}"; node_start "$1"; }

node_promote() { as_pg "${NODE_BIN[$1]}/pg_ctl" -D "${NODE_DIR[$1]}/data" -w promote >/dev/null; }

node_reload() { as_pg "${NODE_BIN[$1]}/pg_ctl" -D "${NODE_DIR[$1]}/data" reload >/dev/null; }

node_sql() { local name="$1"; shift; node_sql_db "$name" "${NODE_DB[$name]:-postgres}" "$@"; }

node_sql_db() {
    local name="$1" db="$2"; shift 2
    as_pg "${NODE_BIN[$name]}/psql" -X -q -v ON_ERROR_STOP=1 -h "${NODE_DIR[$name]}" -p "${NODE_PORT[$name]}" \
        -d "$db" -At "$@"
}

node_wait() { local name="$1" secs="$2"; wait_until "$secs" node_sql "$name" -c "$3"; }

node_dir() { echo "${NODE_DIR[$1]}"; }
node_port() { echo "${NODE_PORT[$1]}"; }
node_log() { echo "${NODE_DIR[$1]}/server.log"; }
node_bin() { echo "${NODE_BIN[$1]}"; }
node_dsn() { echo "host=${NODE_DIR[$1]} port=${NODE_PORT[$1]} dbname=${2:-postgres} user=${3:-postgres}"; }
node_pid() { head -1 "${NODE_DIR[$1]}/data/postmaster.pid" 2>/dev/null || true; }

node_stop_all() {
    local i
    for ((i = ${#NODE_NAMES[@]} - 1; i >= 0; i--)); do node_stop "${NODE_NAMES[$i]}" "${1:-fast}"; done
}
