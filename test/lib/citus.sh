# shellcheck shell=bash
# Citus for the scripts that need it (test/e2e/citus.sh, bench/run.sh): the build for
# PostgreSQL 15 in ../shared/citus (COSID_CITUS_TARBALL overrides), installed into the
# PostgreSQL that PG_BIN belongs to, and nodes that preload 'citus,cosid'.  Source after
# scripts/lib.sh.

# citus_install: 0 when Citus is installed for PG_BIN; otherwise says why in one line, 1.
citus_install() {
    local tarball major pkglib
    tarball="${COSID_CITUS_TARBALL:-$(ls "$COSID_ROOT"/../shared/citus/*.tar.gz 2>/dev/null | head -1 || true)}"
    if [ -z "$tarball" ] || [ ! -f "$tarball" ]; then
        echo "# skip: no Citus build (looked for $COSID_ROOT/../shared/citus/*.tar.gz; set COSID_CITUS_TARBALL)"
        return 1
    fi
    major=$("$PG_BIN/pg_config" --version | grep -oE '[0-9]+' | head -1)
    if [ "$major" != 15 ]; then echo "# skip: the Citus build is for PostgreSQL 15, this is $major"; return 1; fi
    # The tarball's paths are usr/lib/postgresql/15/...: "usr" stripped, unpacked at this
    # PostgreSQL's prefix (/usr for Debian's: the same as tar -C / unstripped).
    pkglib=$("$PG_BIN/pg_config" --pkglibdir)
    if ! cmp -s <(tar -xzOf "$tarball" usr/lib/postgresql/15/lib/citus.so) "$pkglib/citus.so"; then
        apt_install_missing libcurl4 liblz4-1 libzstd1
        tar -C "${pkglib%/lib/postgresql/15/lib}" --strip-components=1 -xzf "$tarball"
    fi
}

# citus_node DIR PORT [settings...]: a fresh node on 127.0.0.1:PORT with Citus created in
# database postgres, cosid preloaded after it, its owner key node-PORT.
citus_node() {
    local d=$1 p=$2; shift 2
    start_server "$d" "$p" "shared_preload_libraries = 'citus,cosid'" "listen_addresses = '127.0.0.1'" \
        "citus.enable_statistics_collection = off" "max_connections = 100" "cosid.owner_key = 'node-$p'" "$@"
    psql_at "$d" "$p" postgres -q -c "CREATE EXTENSION citus" >/dev/null
}
