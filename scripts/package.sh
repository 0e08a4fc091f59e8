#!/usr/bin/env bash
# Builds the Debian package postgresql-15-cosid_<version>_amd64.deb the way PostgreSQL
# extensions are packaged in Debian (debian/: debhelper with pg_buildext's pgxs_loop, one
# build per major in debian/pgversions), from a copy of the tracked files.
#
#   bash scripts/package.sh [OUTDIR]     (default: ./build-deb)
#
# Then: dpkg -i OUTDIR/postgresql-15-cosid_*_amd64.deb
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
out="$(mkdir -p "${1:-$COSID_ROOT/build-deb}" && cd "${1:-$COSID_ROOT/build-deb}" && pwd)"
apt_install_missing debhelper postgresql-server-dev-all dpkg-dev g++ libpq-dev
tmp="$(mktemp -d /tmp/cosid-package.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/cosid"
(cd "$COSID_ROOT" && git ls-files -z | xargs -0 cp --parents -t "$tmp/cosid")
log "dpkg-buildpackage in $tmp/cosid"
if ! (cd "$tmp/cosid" && dpkg-buildpackage -us -uc -b) > "$tmp/build.log" 2>&1; then
    tail -40 "$tmp/build.log"
    echo "package: dpkg-buildpackage failed"
    exit 1
fi
cp "$tmp"/*.deb "$out/"
ls "$out"/*.deb
