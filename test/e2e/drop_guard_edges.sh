#!/usr/bin/env bash
# Edges of the DROP guard (src/pg/drop_guard.cpp).
# 1. The DROP DATABASE check's worker runs as a superuser in the database named by whoever
#    issues the statement: a database-level search_path put there by its owner must not
#    choose the operators of its look.  Before: a role with only CREATEDB made `=` on name
#    its own function in its database, ran DROP DATABASE of it, and became superuser.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/drop_guard_edges"
S="$base/s"; PS=55730
trap 'stop_server "$S" immediate' EXIT
q() { local db=$1; shift; psql_at "$S" "$PS" "$db" -At "$@"; }
# err DB SQL [user]: the error of SQL run in DB (verbose), empty when it succeeded
err() { as_pg "$PG_BIN/psql" -X -q -h "$S" -p "$PS" -d "$1" -U "${3:-postgres}" -v ON_ERROR_STOP=1 \
        -v VERBOSITY=verbose -c "$2" 2>&1 >/dev/null | grep -E '^(ERROR|DETAIL)' || true; }
code() { { grep -oE "ERROR:  [0-9A-Z]{5}" <<<"$1" || true; } | head -1 | cut -c9-; }
has_cosid() { q "$1" -c "SELECT count(*) FROM pg_extension WHERE extname = 'cosid'"; }

start_server "$S" "$PS" "cosid.ttl = '20s'"
q postgres -c "CREATE EXTENSION cosid" -c "CREATE DATABASE scratch" -c "CREATE DATABASE half" \
  -c "CREATE DATABASE twice" -c "CREATE ROLE mallory LOGIN CREATEDB" >/dev/null
q scratch -c "SET client_min_messages = error" -c "CREATE EXTENSION cosid" >/dev/null
live() { q postgres -c "SELECT cosid_next() > 0" -c "SELECT count(*) > 0 FROM cosid.lease WHERE ceiling > cosid.store_now()" | tr '\n' ' '; }

echo "# 1. a database owner's search_path does not choose the check's operators"
as_pg "$PG_BIN/psql" -X -q -h "$S" -p "$PS" -U mallory -d postgres -c "CREATE DATABASE evil" >/dev/null
as_pg "$PG_BIN/psql" -X -q -h "$S" -p "$PS" -U mallory -d evil -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE SCHEMA s;
CREATE FUNCTION s.eq(name, name) RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) current_user) THEN
        EXECUTE 'ALTER ROLE mallory SUPERUSER';
    END IF;
    RETURN pg_catalog.nameeq($1, $2);
END $$;
CREATE OPERATOR s.= (leftarg = name, rightarg = name, function = s.eq);
ALTER DATABASE evil SET search_path = s, pg_catalog;
SQL
out=$(err postgres "DROP DATABASE evil" mallory)
check "mallory drops her database evil" "" "$out"
check "mallory is not superuser after it" f "$(q postgres -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'")"

exit $FAIL
