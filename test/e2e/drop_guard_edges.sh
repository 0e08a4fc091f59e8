#!/usr/bin/env bash
# Edges of the DROP guard (src/pg/backend/drop_guard.cpp).
# 1. The DROP DATABASE check's worker runs as a superuser in the database named by whoever
#    issues the statement: a database-level search_path put there by its owner must not
#    choose the operators of its look.  Before: a role with only CREATEDB made `=` on name
#    its own function in its database, ran DROP DATABASE of it, and became superuser.
# 2. Statements that drop extension cosid as a cascade (DROP SCHEMA public CASCADE, the
#    schema it is installed in; DROP EXTENSION plpgsql CASCADE, the language of its
#    functions) and a DROP TABLE of its lease table taken out of the extension are held as
#    DROP EXTENSION is.  Before: each went through with a live window (a store made again
#    grants that slot from its now: duplicate ids).
# 3. A database left invalid by an interrupted DROP DATABASE (no session can connect to it,
#    the worker neither) can be dropped.  Before: refused (55000) for good.
# 4. Two renames of one database in one transaction: the second no longer waits for a worker
#    that waits for the first's lock.  Before: it hung until statement_timeout.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/drop_guard_edges"
S="$base/s"; PS=55730
trap 'node_stop_all immediate' EXIT
qd() { local db=$1; shift; node_sql_db main "$db" "$@"; }  # qd DB [psql args...]: on database DB
# err DB SQL [user]: the error of SQL run in DB (verbose), empty when it succeeded
err() { node_sql_db main "$1" -U "${3:-postgres}" -v VERBOSITY=verbose -c "$2" 2>&1 >/dev/null | grep -E '^(ERROR|DETAIL)' || true; }
has_cosid() { qd "$1" -c "SELECT count(*) FROM pg_extension WHERE extname = 'cosid'"; }

node_up main "$S" "$PS" "cosid.ttl = '20s'"
q -c "CREATE EXTENSION cosid" -c "CREATE DATABASE scratch" -c "CREATE DATABASE half" \
  -c "CREATE DATABASE twice" -c "CREATE ROLE mallory LOGIN CREATEDB" >/dev/null
qd scratch -c "SET client_min_messages = error" -c "CREATE EXTENSION cosid" >/dev/null
live() { q -c "SELECT cosid_next() > 0" -c "SELECT count(*) > 0 FROM cosid.lease WHERE ceiling > cosid.store_now()" | tr '\n' ' '; }

echo "# 1. a database owner's search_path does not choose the check's operators"
q -U mallory -c "CREATE DATABASE evil" >/dev/null
node_sql_db main evil -U mallory >/dev/null <<'SQL'
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
check "mallory is not superuser after it" f "$(q -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'")"

echo "# 2. drops that reach extension cosid as a cascade, with a live window"
check "S's store has a window ahead" "t t " "$(live)"
out=$(err postgres "BEGIN; DROP SCHEMA public CASCADE; ROLLBACK")
check "DROP SCHEMA public CASCADE (cosid's schema): 55006" 55006 "$(sqlstate_of "$out")"
check_true "... the error says why" "$(grep -q 'cannot drop extension cosid while 1 slots' <<<"$out" && echo t)"
out=$(err postgres "BEGIN; DROP EXTENSION plpgsql CASCADE; ROLLBACK")
check "DROP EXTENSION plpgsql CASCADE: 55006" 55006 "$(sqlstate_of "$out")"
out=$(err postgres "BEGIN; ALTER EXTENSION cosid DROP TABLE cosid.lease; DROP TABLE cosid.lease CASCADE; ROLLBACK")
check "DROP TABLE cosid.lease taken out of the extension first: 55006" 55006 "$(sqlstate_of "$out")"
check "S still has cosid and issues" "1 t t " "$(has_cosid postgres) $(live)"
# what is not cosid's goes as before, also a cascade to a column default of cosid_next()
q -c "CREATE SCHEMA app" -c "CREATE TABLE app.t (id bigint DEFAULT cosid_next())" >/dev/null
check "DROP SCHEMA app CASCADE (a table with a cosid_next() default) goes through" "" \
    "$(err postgres "DROP SCHEMA app CASCADE")"
check "DROP SCHEMA public CASCADE in a store without windows ahead goes through" " 0" \
    "$(err scratch "DROP SCHEMA public CASCADE") $(has_cosid scratch)"

echo "# 3. a database an interrupted DROP DATABASE left invalid"
q -c "UPDATE pg_database SET datconnlimit = -2 WHERE datname = 'half'" >/dev/null
check "DROP DATABASE of it goes through" " 0" \
    "$(err postgres "DROP DATABASE half") $(q -c "SELECT count(*) FROM pg_database WHERE datname = 'half'")"

echo "# 4. two renames of one database in one transaction"
out=$(err postgres "SET statement_timeout = '20s'; BEGIN; ALTER DATABASE twice RENAME TO twice2;
                    ALTER DATABASE twice2 RENAME TO twice3; COMMIT")
check "both go through (no wait for the check's worker)" " twice3" \
    "$out $(q -c "SELECT datname FROM pg_database WHERE datname LIKE 'twice%'")"
assert_store_verified "$S" "$PS" postgres
exit $FAIL
