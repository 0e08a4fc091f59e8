#!/usr/bin/env bash
# A remote store that refuses the keeper's login (a wrong password, none given, a role
# without LOGIN, a database that does not exist; a role that does not exist is refused as a
# wrong password by the server itself) fails cosid_next() at once with ZC006: the store's reason in
# DETAIL (its password never), what to fix in HINT.  Before, each call waited out
# cosid.acquire_timeout (20 s here) and then reported a timeout.  Once the store lets the
# keeper in (here: the role's password set to the DSN's), the next call issues ids, without a
# restart of the instance.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/store_refusal"
S="$base/store"; A="$base/a"; PS=56633; PA=56634
trap 'node_stop_all immediate' EXIT

# The store S asks every role but postgres for a password (scram), as Debian's pg_hba.conf does.
node_up s "$S" "$PS" "password_encryption = 'scram-sha-256'"
qs -c "CREATE EXTENSION cosid" -c "CREATE ROLE keeper_a LOGIN PASSWORD 'RightPass33' IN ROLE cosid_keeper" \
    -c "CREATE ROLE keeper_nologin NOLOGIN PASSWORD 'RightPass33' IN ROLE cosid_keeper" >/dev/null
sed -i 's/^local\(.*\)trust$/local\1scram-sha-256/' "$S/data/pg_hba.conf"
echo "local all postgres trust" | cat - "$S/data/pg_hba.conf" > "$S/hba.tmp" && mv "$S/hba.tmp" "$S/data/pg_hba.conf"
chown "$PG_USER" "$S/data/pg_hba.conf"
qs -c "SELECT pg_reload_conf()" >/dev/null
: > "$base/nopass"; chown "$PG_USER" "$base/nopass"; chmod 600 "$base/nopass"

# One case a line: name, a tab, what DETAIL says, a tab, a word of the HINT, a tab, the DSN
# (passfile: the postgres user's own ~/.pgpass plays no part).
common="host=$S port=$PS passfile=$base/nopass"
cat > "$base/cases" <<EOF2
wrong password	password authentication failed for user "keeper_a"	ALTER ROLE	$common user=keeper_a password=WrongPass33 dbname=postgres
no password	no password supplied	.pgpass	$common user=keeper_a dbname=postgres
role without LOGIN	role "keeper_nologin" is not permitted to log in	ALTER ROLE ... LOGIN	$common user=keeper_nologin password=RightPass33 dbname=postgres
no such database	database "no_store_db" does not exist	dbname=	$common user=keeper_a password=RightPass33 dbname=no_store_db
EOF2
first=1
while IFS=$'\t' read -r name reason hintword dsn; do
    conf="cosid.store_dsn = '$dsn'"
    if [ "$first" = 1 ]; then
        node_up a "$A" "$PA" "$conf" "cosid.acquire_timeout = '20s'"
        qa -c "CREATE EXTENSION cosid" >/dev/null
        first=0
    else
        node_stop a
        sed -i '/^cosid.store_dsn = /d' "$A/data/postgresql.conf"
        echo "$conf" >> "$A/data/postgresql.conf"
        node_start a
    fi
    for call in 1 2; do  # the first call after the start, and one more
        t0=$(now_ms)
        out=$(qa -v VERBOSITY=verbose -c "SELECT cosid_next()" 2>&1 || true)
        ms=$(( $(now_ms) - t0 ))
        echo "# $name, call $call: $ms ms: $(grep -E '^(ERROR|DETAIL|HINT)' <<<"$out" | cut -c1-200 | tr '\n' ' ')"
        check "$name, call $call: cosid_next() fails with ZC006" ZC006 "$(sqlstate_of "$out")"
        check_true "$name, call $call: at once (${ms} ms, well under the 20 s acquire_timeout)" \
            "$([ "$ms" -lt 3000 ] && echo t || echo f)"
        check_true "$name, call $call: DETAIL carries the store's reason" \
            "$(grep -E '^DETAIL:' <<<"$out" | grep -qF "$reason" && echo t || echo f)"
        check_true "$name, call $call: HINT says what to fix ($hintword)" \
            "$(grep -E '^HINT:' <<<"$out" | grep -qF "$hintword" && echo t || echo f)"
        check "$name, call $call: no password shown" 0 "$(grep -c 'WrongPass33\|RightPass33' <<<"$out" || true)"
    done
done < "$base/cases"

# The store lets the keeper in: the password in the DSN becomes the role's.  No restart.
node_stop a
sed -i '/^cosid.store_dsn = /d' "$A/data/postgresql.conf"
echo "cosid.store_dsn = '$(sed -n 1p "$base/cases" | cut -f4)'" >> "$A/data/postgresql.conf"
node_start a
out=$(qa -v VERBOSITY=verbose -c "SELECT cosid_next()" 2>&1 || true)
check "wrong password: refused first" ZC006 "$(sqlstate_of "$out")"
qs -c "ALTER ROLE keeper_a PASSWORD 'WrongPass33'" >/dev/null
check "the store takes the password now: the next call issues an id, without a restart" t \
    "$(wait_for 10 "an id" qa -c "SELECT cosid_next() > 0" 2>/dev/null)"
node_stop a
check "the server log never shows a password" 0 "$(grep -c 'WrongPass33\|RightPass33' "$A/server.log" || true)"
assert_store_verified "$S" "$PS" postgres "S, once it granted A a window"
exit $FAIL
