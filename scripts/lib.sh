# Shared helpers for cosid's scripts: install prerequisites, build, and run throwaway
# PostgreSQL servers as the unprivileged `postgres` user (PostgreSQL refuses root).
set -euo pipefail

COSID_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Debian's PostgreSQL 15, or another major's bin directory (COSID_PG_BIN, scripts/test.sh).
PG_BIN="${COSID_PG_BIN:-/usr/lib/postgresql/15/bin}"
PG_USER="postgres"

log() { printf '\n==> %s\n' "$*"; }

as_pg() {
    if [ "$(id -un)" = "$PG_USER" ]; then "$@"; else runuser -u "$PG_USER" -- "$@"; fi
}

# apt_install_missing PACKAGE...: installs those not installed yet (one apt-get update first).
apt_install_missing() {
    local need=() p
    for p in "$@"; do
        dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
    done
    if [ "${#need[@]}" -gt 0 ]; then
        log "installing ${need[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq "${need[@]}" >/dev/null
    fi
}

install_prerequisites() {
    apt_install_missing postgresql-15 postgresql-server-dev-15 postgresql-contrib libpq-dev libkrb5-dev libipc-run-perl \
        libgtest-dev g++ make procps pgbouncer python3 debhelper postgresql-server-dev-all dpkg-dev
    id "$PG_USER" >/dev/null 2>&1 || useradd --system --create-home "$PG_USER"
}

build_and_install() {
    log "building and installing cosid"
    make -C "$COSID_ROOT" -s -j2 "$@" >/dev/null
    make -C "$COSID_ROOT" -s install >/dev/null
}

# fresh_cluster DATADIR: a new cluster, copied from one initdb made once per machine (initdb
# takes seconds; the suite starts dozens of servers).  Each copy is a separate cluster, with
# the same system identifier (the tests that need another one run initdb themselves).
INITDB_TEMPLATE="/tmp/cosid-initdb-template-$(basename "$(dirname "$PG_BIN")")"
fresh_cluster() {
    if [ ! -f "$INITDB_TEMPLATE/PG_VERSION" ]; then
        local tmp="$INITDB_TEMPLATE.$$"
        rm -rf "$tmp"; mkdir -p "$tmp"; chown "$PG_USER" "$tmp"
        as_pg "$PG_BIN/initdb" -D "$tmp/data" -A trust -U postgres >/dev/null
        rm -rf "$INITDB_TEMPLATE"; mv "$tmp/data" "$INITDB_TEMPLATE"; rmdir "$tmp"
    fi
    cp -a "$INITDB_TEMPLATE" "$1"
}

# start_server DIR PORT [extra postgresql.conf lines...]: a fresh cluster with cosid preloaded.
start_server() {
    local dir="$1" port="$2"; shift 2
    rm -rf "$dir"
    mkdir -p "$dir"
    chown "$PG_USER" "$dir"
    fresh_cluster "$dir/data"
    {
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
        case "$0" in */test/*) echo "cosid.test_reach_cap = '1ms'" ;; esac
        for line in "$@"; do echo "$line"; done
    } >> "$dir/data/postgresql.conf"
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
