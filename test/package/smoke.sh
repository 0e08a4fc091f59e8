#!/usr/bin/env bash
# The Debian package against the installed files: dpkg -i, a fresh PostgreSQL 15 that
# preloads cosid, CREATE EXTENSION, cosid_next(), an upgrade from 1.0; then dpkg -r and a
# check that its files are gone.  bash test/package/smoke.sh DEB WORKDIR
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
deb="$1"; dir="$2/package_smoke"; port=55478
pkglib="$("$PG_BIN/pg_config" --pkglibdir)"; share="$("$PG_BIN/pg_config" --sharedir)/extension"
# the development install (make install) is taken away first: only the package's files count
rm -f "$pkglib/cosid.so" "$share"/cosid.control "$share"/cosid--*.sql
check "dpkg -i installs $(basename "$deb")" 0 "$(dpkg -i "$deb" > "$2/dpkg.log" 2>&1; echo $?)"
check "the package owns the library, the control file and every script" 0 \
    "$(for f in "$pkglib/cosid.so" "$share/cosid.control" $(cd "$(dirname "$0")/../../sql" && ls cosid--*.sql | sed "s|^|$share/|"); do
           dpkg -S "$f" >/dev/null 2>&1 || echo "$f"; done | wc -l)"
version=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$share/cosid.control")
# the package's version names the extension version it installs (1.5.0 ships 1.5): a
# changelog left behind would publish new scripts under an old package version
check "the package version $(basename "$deb" | cut -d_ -f2) is the extension's $version" "$version" \
    "$(basename "$deb" | cut -d_ -f2 | cut -d. -f1,2)"
start_server "$dir" "$port"
trap 'stop_server "$dir" immediate' EXIT
q() { psql_at "$dir" "$port" postgres -At "$@"; }
check "CREATE EXTENSION cosid from the package" "$version" \
    "$(q -c "CREATE EXTENSION cosid" -c "SELECT extversion FROM pg_extension WHERE extname = 'cosid'")"
check_true "cosid_next() issues with the packaged library preloaded" \
    "$(q -c "SET cosid.acquire_timeout = '10s'" -c "SELECT cosid_next() > 0 AND (SELECT count(*) FROM cosid_pool()) = 1")"
check "an update from 1.0 with the packaged scripts" "$version" \
    "$(q -c "CREATE DATABASE up" >/dev/null; psql_at "$dir" "$port" up -At -c "SET client_min_messages = error" \
        -c "CREATE EXTENSION cosid VERSION '1.0'" -c "ALTER EXTENSION cosid UPDATE" \
        -c "SELECT extversion FROM pg_extension WHERE extname = 'cosid'")"
stop_server "$dir"
trap - EXIT
check "dpkg -r removes it" 0 "$(dpkg -r postgresql-15-cosid > "$2/dpkg-r.log" 2>&1; echo $?)"
check "its files are gone" 0 "$(ls "$pkglib/cosid.so" "$share"/cosid* 2>/dev/null | wc -l)"
exit $FAIL
