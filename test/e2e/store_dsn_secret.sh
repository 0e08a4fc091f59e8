#!/usr/bin/env bash
# No message, log line or view shows a password of cosid.store_dsn, however malformed the
# string: libpq echoes pieces of a connection string it cannot parse, and the keeper's error
# reached ZC006's DETAIL (seen by any role calling cosid_next()), cosid_health() and the
# server log.  Instance A is started with one DSN after another (URI and keyword forms, each
# with its own password); a role without grants calls cosid_next(), a pg_monitor role reads
# cosid_health(); then the DETAILs, the health rows and the whole server log are searched for
# every password: zero hits; SHOW and pg_settings (read by pg_monitor) show it hidden too.  A last DSN is well-formed, with a wrong password, against a store
# S that asks for one: the keeper's error is shown, and its password is not.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
base="${1:-/tmp/cosid-e2e}/store_dsn_secret"
S="$base/store"; A="$base/a"; PS=55603; PA=55604
trap 'node_stop_all immediate' EXIT

# The store S: keeper_a logs in with a password (scram) over its socket.
node_up s "$S" "$PS" "password_encryption = 'scram-sha-256'"
qs -c "CREATE EXTENSION cosid" -c "CREATE ROLE keeper_a LOGIN PASSWORD 'RightPass31' IN ROLE cosid_keeper" >/dev/null
sed -i 's/^local\(.*\)trust$/local\1scram-sha-256/' "$S/data/pg_hba.conf"
echo "local all postgres trust" | cat - "$S/data/pg_hba.conf" > "$S/hba.tmp" && mv "$S/hba.tmp" "$S/data/pg_hba.conf"
chown "$PG_USER" "$S/data/pg_hba.conf"
qs -c "SELECT pg_reload_conf()" >/dev/null

# One DSN per line: the password to look for, a tab, the DSN.
cat > "$base/dsns" <<EOF
TopSecret42	postgresql://keeper_a:TopSecret42@[::1/postgres
PctSecret77	postgresql://keeper_a:PctSecret77%zz@localhost/postgres
QrySecret88	postgresql:///postgres?host=$S&port=$PS&user=keeper_a&password=QrySecret88%
KwSecret55	host=$S port=$PS user=keeper_a password=Kw KwSecret55 dbname=postgres
QuoSecret66	host=$S port=$PS user=keeper_a password='Quo\\'QuoSecret66' dbname=postgres bogus=1
MhSecret44	postgresql://keeper_a:MhSecret44@h1.invalid:1,[::1:2/postgres
WrongPass19	host=$S port=$PS user=keeper_a password='WrongPass19' dbname=postgres
EOF
first=1
while IFS=$'\t' read -r secret dsn; do
    conf="cosid.store_dsn = '$(sed "s/\\\\/\\\\\\\\/g; s/'/''/g" <<<"$dsn")'"
    if [ "$first" = 1 ]; then
        node_up a "$A" "$PA" "$conf" "cosid.ttl = '3s'" "cosid.acquire_timeout = '2s'"
        qa -c "CREATE EXTENSION cosid" -c "CREATE ROLE app LOGIN" -c "CREATE ROLE mon LOGIN IN ROLE pg_monitor" >/dev/null
        first=0
    else
        node_stop a
        sed -i '/^cosid.store_dsn = /d' "$A/data/postgresql.conf"
        echo "$conf" >> "$A/data/postgresql.conf"
        node_start a
    fi
    shown=$(qa -c "SHOW cosid.store_dsn" -c "SELECT current_setting('cosid.store_dsn')"
            qa -U mon -c "SHOW cosid.store_dsn")
    listed=$(qa -U mon -c "SELECT count(*) FROM pg_settings WHERE name = 'cosid.store_dsn'"
             qa -U mon -c "SHOW ALL" | grep -c 'cosid.store_dsn' || true)
    check "A runs with the DSN of $secret: SHOW and current_setting hide its password (superuser, pg_monitor); pg_settings and SHOW ALL leave it out" \
        "3|0|0 0" "$(grep -c . <<<"$shown")|$(grep -c "$secret" <<<"$shown" || true)|$(echo $listed)"
    out=$(qa -U app -v VERBOSITY=verbose -c "SELECT cosid_next()" 2>&1 || true)
    echo "# $secret: $(grep -E '^(ERROR|DETAIL)' <<<"$out" | cut -c1-220 | tr '\n' ' ')"
    check "cosid_next() by a role without grants fails (ZC006)" ZC006 "$(sqlstate_of "$out")"
    check_true "its DETAIL says what the keeper found" "$(grep -qE '^DETAIL:.*(failed|answered|reports: .)' <<<"$out" && echo t || echo f)"
    health=$(qa -U mon -c "SELECT name, status, detail FROM cosid_health() WHERE status <> 'ok'" 2>&1)
    echo "$out" > "$base/out.$secret"; echo "$health" > "$base/health.$secret"
    check "no DETAIL, message or health row shows the password ($secret)" 0 \
        "$(cat "$base/out.$secret" "$base/health.$secret" | grep -c "$secret" || true)"
done < "$base/dsns"
grep -h '^DETAIL' "$base"/out.* | grep -q '\*\*\*\*\*\*\*\*' && hidden=t || hidden=f
check_true "the DETAILs show where a password was (********)" "$hidden"
check_true "the well-formed DSN's error is shown: authentication failed for keeper_a" \
    "$(grep -q 'password authentication failed for user "keeper_a"' "$base/out.WrongPass19" && echo t || echo f)"
node_stop a
for secret in $(cut -f1 "$base/dsns"); do
    check "the server log never shows password $secret" 0 "$(grep -c "$secret" "$A/server.log" || true)"
done
check_true "the server log has the keeper's errors (scrubbed, not missing)" \
    "$(grep -q 'cosid' "$A/server.log" && grep -q '\*\*\*\*\*\*\*\*' "$A/server.log" && echo t || echo f)"
exit $FAIL
