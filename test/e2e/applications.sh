#!/usr/bin/env bash
# docs/applications.md as a reader runs it: every marked block of the page, in page order
# (test/meta/doc_blocks.py --steps), against a server that preloads cosid and lets the
# application in over TCP with a password (scram-sha-256, as Debian's pg_hba.conf does for
# localhost). SQL blocks run as postgres; file blocks are saved in the reader's directory; sh
# blocks run there with the page's DATABASE_URL (its port made this server's). Then, for each
# framework's program: the rows are in its table, the column's default is cosid's, the ids the
# program printed (read back with RETURNING) are exactly the table's ids, all distinct, and
# issued by cosid in the last hour; in JavaScript the default layout's ids are printed as JSON
# strings with every digit (most of them are not exact as a JS number, which the test
# checks: a rounded id would fail), the 53-bit namespace's as numbers below 2^53.
# Needs python3-sqlalchemy python3-psycopg2 python3-django ruby-activerecord ruby-pg nodejs
# npm (scripts/test.sh installs them) and the npm registry (or npm's cache) for pg, sequelize,
# knex and typeorm: without them the checks fail, saying why.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
WORK="${1:-/tmp/cosid-e2e}/applications"; PORT=29670
DIR="$WORK/server"; APP="$WORK/reader"; STEPS="$WORK/steps"
PAGE="$COSID_ROOT/docs/applications.md"
started=$SECONDS
trap 'node_stop_all immediate' EXIT
node_up main "$DIR" "$PORT" "listen_addresses = 'localhost'" "password_encryption = 'scram-sha-256'"
cat > "$DIR/data/pg_hba.conf" <<'HBA'
local all all trust
host all all 127.0.0.1/32 scram-sha-256
host all all ::1/128 scram-sha-256
HBA
node_reload main
# shellcheck disable=SC2034  # NODE_DB: read by node_sql (test/lib/node.sh)
NODE_DB["main"]=app  # q: the page's database (made by its SQL)

# What the page's programs need, said plainly when missing (not skipped).
missing=""
/usr/bin/python3 -c 'import sqlalchemy, django, psycopg2' 2>/dev/null || missing+=" python3-sqlalchemy/python3-django/python3-psycopg2"
ruby -e 'require "active_record"; require "pg"' 2>/dev/null || missing+=" ruby-activerecord/ruby-pg"
command -v node >/dev/null && command -v npm >/dev/null || missing+=" nodejs/npm"
check "the page's interpreters and packages are installed (scripts/test.sh installs them)" "" "$missing"

rm -rf "$APP" "$STEPS"; mkdir -p "$APP"
steps=$(python3 "$COSID_ROOT/test/meta/doc_blocks.py" --steps "$PAGE" "$STEPS")
check_true "docs/applications.md has marked sql, env, file and sh blocks" \
    "$(for k in sql env file sh; do awk '{print $2}' <<<"$steps" | grep -qx "$k" || echo no; done | grep -q no && echo f || echo t)"

url=""
# The reader's shell: Debian's python3 (whatever python3 comes first in PATH), the page's
# DATABASE_URL, npm without its audit, fund and update messages, from its cache when it has
# the packages (the registry is asked otherwise), giving up on a registry it cannot reach in
# seconds rather than minutes (npm retries with backoff: 212 s here with its defaults).
run_sh() {
    (cd "$APP" && env PATH="/usr/bin:/bin:$PATH" DATABASE_URL="$url" npm_config_audit=false \
        npm_config_fund=false npm_config_update_notifier=false npm_config_prefer_offline=true \
        npm_config_fetch_retries=1 npm_config_fetch_retry_mintimeout=1000 \
        npm_config_fetch_retry_maxtimeout=2000 npm_config_fetch_timeout=20000 \
        bash -e "$1")
}
while read -r file kind arg line; do
    [ -n "$file" ] || continue
    where="applications.md:$line"
    case "$kind" in
    sql)
        chown "$PG_USER" "$STEPS" "$file"
        # (as the reader runs it: psql's own output format, not the shorthand's -At)
        status=0; psql_at "$DIR" "$PORT" postgres -f "$file" > "$file.out" 2>&1 || status=$?
        check "$where: the SQL block runs as postgres without an error" 0 "$status"
        [ "$status" = 0 ] || tail -5 "$file.out" | sed 's/^/#   /' ;;
    env)
        page_url=$(sed -nE "s/^export DATABASE_URL='([^']*)'$/\1/p" "$file")
        url=${page_url/@localhost:5432\//@localhost:$PORT/}
        check_true "$where: the page's DATABASE_URL names localhost:5432 (here: port $PORT)" \
            "$([ -n "$page_url" ] && [ "$url" != "$page_url" ] && echo t || echo f)" ;;
    file)
        mkdir -p "$(dirname "$APP/$arg")"; cp "$file" "$APP/$arg" ;;
    sh)
        t0=$SECONDS; status=0
        run_sh "$file" > "$file.out" 2>&1 || status=$?
        check "$where: \`$(paste -sd';' "$file" | sed 's/;/; /g')\` runs without an error ($((SECONDS - t0)) s)" 0 "$status"
        if [ "$status" != 0 ]; then
            tail -8 "$file.out" | sed 's/^/#   /'
            grep -q '^npm ' "$file" && echo "#   npm install failed: the npm registry cannot be reached and npm's cache lacks the pinned packages? The JavaScript checks below fail."
        fi ;;
    *) check "$where: a known kind of block" "sql/env/file/sh" "$kind" ;;
    esac
done <<<"$steps"

# program table rows namespace form: the page's programs and what they leave behind
# (form: int for Python and Ruby, string for JSON strings, number for JSON numbers).
while read -r program table rows ns form; do
    out=$(grep -l -- "$program" "$STEPS"/*.sh 2>/dev/null | head -1)
    out=${out:+$out.out}
    if [ -z "$out" ] || [ ! -f "$out" ]; then
        check "$program: the page runs it" "ran" "not found"; continue
    fi
    printed=$(grep -oE '[0-9]+' "$out" | awk 'length >= 12' | LC_ALL=C sort || true)
    table_ids=$(q -c "SELECT id FROM $table " 2>/dev/null | LC_ALL=C sort || true)
    check "$program: $rows rows in $table" "$rows" "$(q -c "SELECT count(*) FROM $table" 2>/dev/null || echo none)"
    check "$program: $table.id's default is cosid_next('$ns')" "cosid_next('$ns'::text)" \
        "$(q -c "SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d JOIN pg_attribute a
                 ON (a.attrelid, a.attnum) = (d.adrelid, d.adnum) WHERE d.adrelid = '$table'::regclass AND a.attname = 'id'" 2>/dev/null)"
    check "$program: the ids it read back are exactly the ids in $table" "$table_ids" "$printed"
    check "$program: $rows distinct ids read back" "$rows" "$(sort -u <<<"$printed" | grep -c . || true)"
    check "$program: every id was issued by cosid in namespace $ns within the last hour" "$rows" \
        "$(q -c "SELECT count(*) FROM $table WHERE id BETWEEN cosid_min_id(now() - interval '1 hour', '$ns') AND cosid_max_id(now(), '$ns')" 2>/dev/null)"
    case "$form" in
    string)
        check "$program: every id printed as a JSON string" "$rows" \
            "$(for id in $table_ids; do grep -qF "\"$id\"" "$out" && echo "$id"; done | grep -c . || true)"
        # Teeth: the default layout's ids are above 2^53; as JS numbers most of them change.
        check_true "$program: some of these ids are not exact as JavaScript numbers (a rounded id would have failed)" \
            "$(node -e 'const ids = process.argv.slice(1);
                console.log(ids.some((s) => String(Number(s)) !== s) && ids.every((s) => BigInt(s) > 2n ** 53n) ? "t" : "f")' \
                $table_ids 2>/dev/null || echo f)" ;;
    number)
        check "$program: every id printed as a JSON number below 2^53" "$rows" \
            "$(for id in $table_ids; do [ "$id" -lt 9007199254740992 ] && grep -qE "(^|[^\"0-9])$id([^\"0-9]|$)" "$out" && echo "$id"; done | grep -c . || true)" ;;
    esac
done <<'PROGRAMS'
orders_sqlalchemy.py orders 7 default int
orders_django.py shop_order 4 default int
orders_activerecord.rb customers 4 default int
products_sequelize.js products 4 default string
events_knex.js events 4 default string
invoices_typeorm.js invoices 4 default string
sessions_web.js sessions 4 web number
PROGRAMS

echo "# applications.sh took $((SECONDS - started)) s"
assert_store_verified "$DIR" "$PORT" postgres
exit $FAIL
