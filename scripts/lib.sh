# shellcheck shell=bash
# Shared helpers for cosid's scripts: install prerequisites, build, and run throwaway
# PostgreSQL servers as the unprivileged `postgres` user (PostgreSQL refuses root).
set -euo pipefail

COSID_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Debian's PostgreSQL 15, or another major's bin directory (COSID_PG_BIN, scripts/test.sh).
PG_BIN="${COSID_PG_BIN:-/usr/lib/postgresql/15/bin}"
PG_USER="postgres"

log() { printf '\n==> %s\n' "$*"; }

# as_pg COMMAND...: COMMAND as the postgres user, with its HOME, USER and LOGNAME (as runuser
# -u sets them).  setpriv, not runuser: no PAM session opened and closed, half the CPU of a
# call, and the suite makes tens of thousands of them (each psql of the tests' loops and waits).
# The user's group and home are looked up once (again on a call, when the user did not exist
# yet: install_prerequisites creates it).
AS_PG_SELF="$(id -un)"
PG_GID="$(id -g "$PG_USER" 2>/dev/null || true)"
PG_HOME="$(getent passwd "$PG_USER" | cut -d: -f6 || true)"
as_pg() {
    if [ "$AS_PG_SELF" = "$PG_USER" ]; then "$@"; return; fi
    if [ -z "${PG_GID:-}" ]; then
        PG_GID="$(id -g "$PG_USER")"; PG_HOME="$(getent passwd "$PG_USER" | cut -d: -f6)"
    fi
    HOME="${PG_HOME:-/}" USER="$PG_USER" LOGNAME="$PG_USER" \
        setpriv --reuid="$PG_USER" --regid="$PG_GID" --init-groups -- "$@"
}

# apt_get ARGS...: apt-get that waits for a lock another apt-get or dpkg holds (the lanes of
# scripts/test.sh install side by side; an unattended upgrade) instead of giving up at once,
# up to COSID_APT_LOCK_TIMEOUT seconds (600) in all.  DPkg::Lock::Timeout makes apt-get wait
# for dpkg's locks; `apt-get update` gives up at once on the lock of its lists whatever that
# says, so a failure that names a lock is tried again, every second, until the deadline.
apt_get() {
    local timeout="${COSID_APT_LOCK_TIMEOUT:-600}" deadline err rc waiting=""
    deadline=$((SECONDS + timeout))
    err="$(mktemp)"
    while :; do
        rc=0
        apt-get -o "DPkg::Lock::Timeout=$((deadline > SECONDS ? deadline - SECONDS : 0))" "$@" 2>"$err" || rc=$?
        if [ "$rc" = 0 ] || [ "$SECONDS" -ge "$deadline" ] || ! grep -qE 'Could not get lock|Unable to (lock|acquire)' "$err"; then
            cat "$err" >&2
            rm -f "$err"
            return "$rc"
        fi
        [ -n "$waiting" ] || echo "apt-get $1: waiting for $(grep -m1 -oE 'lock /[^ ]*[^ .]' "$err" || echo 'its lock') (at most ${timeout} s)" >&2
        waiting=1
        sleep 1
    done
}

# apt_install_missing PACKAGE...: installs those not installed yet (one apt-get update first).
# A failure (a mirror that did not answer, lists that changed under the install) is tried once
# more, from the update.
apt_install_missing() {
    local need=() p
    for p in "$@"; do
        dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
    done
    [ "${#need[@]}" -gt 0 ] || return 0
    log "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt_get update -qq && apt_get install -y -qq "${need[@]}" >/dev/null; }; then
        echo "apt_install_missing: installing ${need[*]} failed; trying once more" >&2
        apt_get update -qq
        apt_get install -y -qq "${need[@]}" >/dev/null
    fi
}

install_prerequisites() {
    apt_install_missing postgresql-15 postgresql-server-dev-15 postgresql-contrib libpq-dev libkrb5-dev libipc-run-perl \
        libgtest-dev g++ make procps pgbouncer python3 debhelper postgresql-server-dev-all dpkg-dev
    id "$PG_USER" >/dev/null 2>&1 || useradd --system --create-home "$PG_USER"
}

# The sanitizers' settings for the unit tests and the model checker built with ASan and UBSan
# (scripts/test.sh and scripts/static_checks.sh): stop at the first report.  (detect_leaks:
# GoogleTest's death tests and the checker's worker threads end by exit.)
# shellcheck disable=SC2034  # used by the scripts that source this file
SAN_ENV=(ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1)

build_and_install() {
    log "building and installing cosid"
    make -C "$COSID_ROOT" -s -j2 "$@" >/dev/null
    make -C "$COSID_ROOT" -s install >/dev/null
}

# fresh_cluster DATADIR: a new cluster, copied from one initdb made once per machine (initdb
# takes seconds; the suite starts dozens of servers).  Each copy is a separate cluster, with
# the same system identifier (the tests that need another one run initdb themselves).  One
# template per PostgreSQL installation, named by its bin directory's whole path (the
# benches' copies of a PostgreSQL all end in .../pg/bin, of whatever major).
INITDB_TEMPLATE="/tmp/cosid-initdb-template-$(tr -c 'A-Za-z0-9\n' '_' <<<"$PG_BIN")"
fresh_cluster() {
    if [ ! -f "$INITDB_TEMPLATE/PG_VERSION" ]; then
        local tmp="$INITDB_TEMPLATE.$$"
        rm -rf "$tmp"; mkdir -p "$tmp"; chown "$PG_USER" "$tmp"
        as_pg "$PG_BIN/initdb" -D "$tmp/data" -A trust -U postgres >/dev/null
        rm -rf "$INITDB_TEMPLATE"; mv "$tmp/data" "$INITDB_TEMPLATE"; rmdir "$tmp"
    fi
    cp -a "$INITDB_TEMPLATE" "$1"
}

# server_conf DIR PORT [extra postgresql.conf lines...]: the postgresql.conf lines of a test
# server in DIR (its socket there, no TCP), cosid preloaded; then the extra lines.
server_conf() {
    local dir="$1" port="$2" line; shift 2
    echo "port = $port"
    echo "listen_addresses = ''"
    echo "unix_socket_directories = '$dir'"
    echo "shared_preload_libraries = 'cosid'"
    echo "max_connections = 60"
    echo "fsync = off"
    # a raise after history a store cannot see (a fork acknowledged, a dump restored)
    # covers the store's limits only, as before cosid 1.7, not the 120 s reach cap, on the
    # test suite's servers: it forks and restores dozens of times (test/e2e/unseen_limits.sh
    # sets it to 0; the demo has no such line)
    case "$0" in */test/*|test/*) echo "cosid.test_reach_cap = '1ms'" ;; esac
    # COSID_SLOW_MS=N: the servers log every statement that ran N ms or more (scripts/test.sh
    # then prints a script's slowest ones after it: where a test's CPU goes)
    [ -z "${COSID_SLOW_MS:-}" ] || echo "log_min_duration_statement = ${COSID_SLOW_MS}"
    for line in "$@"; do echo "$line"; done
}

# start_server DIR PORT [extra postgresql.conf lines...]: a fresh cluster with cosid preloaded.
# (The end-to-end tests make their servers with test/lib/node.sh.)
start_server() {
    local dir="$1" port="$2"; shift 2
    rm -rf "$dir"
    mkdir -p "$dir"
    chown "$PG_USER" "$dir"
    fresh_cluster "$dir/data"
    server_conf "$dir" "$port" "$@" >> "$dir/data/postgresql.conf"
    as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null
}

stop_server() {
    local dir="$1" mode="${2:-fast}"
    as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -m "$mode" -w stop >/dev/null 2>&1 || true
}

# psql_at DIR PORT DB [psql args...]
psql_at() {
    local dir="$1" port="$2" db="$3"; shift 3
    as_pg "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -d "$db" "$@"
}

# cpu_run FILE CMD...: runs CMD in a cpuacct cgroup of its own and writes the CPU seconds it
# and everything it started used (servers daemonized by pg_ctl included: they stay in the
# group) to FILE. The suite is CPU-bound on 2 cores, so this, not wall time, says what a test
# costs. Without a writable cgroup v1 cpuacct hierarchy it only runs CMD (FILE says "?").
cpu_run() {
    local file=$1 root=/sys/fs/cgroup/cpuacct g rc=0 usage p
    shift
    g="$root/cosid-$$-$RANDOM$RANDOM"
    if ! mkdir "$g" 2>/dev/null; then
        echo "?" > "$file"; "$@"; return
    fi
    ( echo "$BASHPID" > "$g/cgroup.procs" && "$@" ) || rc=$?  # (a subshell: functions work)
    usage=$(cat "$g/cpuacct.usage" 2>/dev/null || echo 0)
    echo $((usage / 1000000000)) > "$file"
    # (what the command left running goes back to the root group, so that the group can go)
    while read -r p; do echo "$p" > "$root/cgroup.procs" 2>/dev/null || true; done < "$g/cgroup.procs"
    rmdir "$g" 2>/dev/null || true
    return "$rc"
}
