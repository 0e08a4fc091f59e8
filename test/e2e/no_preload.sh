#!/usr/bin/env bash
# Without shared_preload_libraries every runtime function fails with a clear error and a
# HINT; the pure functions still work.  In a database other than cosid.database,
# cosid_next() fails with its own SQLSTATE.
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
dir="${1:-/tmp/cosid-e2e}/no_preload"; port=55440
trap 'node_stop_all immediate' EXIT
node_up main "$dir" "$port" "shared_preload_libraries = ''"
q -c "CREATE EXTENSION cosid" >/dev/null
for fn in "cosid_next()" "cosid_next('default')" "cosid_pool()" "cosid_stats()" "cosid_release()" "cosid_release('default', 0)"; do
    out=$(q -v VERBOSITY=verbose -c "SELECT $fn" 2>&1 || true)
    check "$fn without preload: SQLSTATE 55000" 1 "$(grep -c 'ERROR:  55000' <<<"$out")"
    check "$fn without preload: HINT names shared_preload_libraries" 1 "$(grep -c 'HINT:  Add cosid to shared_preload_libraries' <<<"$out")"
done
check "cosid_parse works without preload" 1 "$(q -c "SELECT (cosid_parse(4194304 + 4096)).slot")"
# every reader, the layouts and the views, in one fresh backend that never loaded the library
check "the readers, cosid_namespace_create and the views work without preload" \
    "1|262|0SZRv9Y1Ejm|386778656946532614|20261203T072017.816Z-3-0262|386778656946532614|t|53|t|0" \
    "$(q -c "SET timezone = 'UTC'" \
         -c "SELECT cosid_namespace_create('web', slot_bits => 4, sequence_bits => 8, total_bits => 53)" \
         -c "SELECT cosid_slot(4194304 + 4096), cosid_sequence(386778656946532614),
                    cosid_to_text(386778656946532614), cosid_from_text('0SZRv9Y1Ejm'),
                    cosid_format(386778656946532614), cosid_from_format('20261203T072017.816Z-3-0262'),
                    cosid_min_id(cosid_timestamp(386778656946532614)) <= 386778656946532614
                        AND 386778656946532614 <= cosid_max_id('2026-12-03 07:20:17.816+00'),
                    (SELECT total_bits FROM cosid_layouts WHERE namespace = 'web'),
                    (SELECT count(*) = 1024 + 16 FROM cosid_leases()),
                    (SELECT count(*) FROM cosid_owners)" 2>&1 | tail -1)"
check "store untouched" 0 "$(q -c "SELECT count(*) FROM cosid.lease WHERE incarnation IS NOT NULL")"

# A store server that does not preload cosid (a shared store): cosid.store_clock_offset is
# only a placeholder there until the library loads, which any role can SET.  A keeper role
# must not move the store's clock with it to take a live lease early.
q -c "CREATE ROLE keeper_k LOGIN IN ROLE cosid_keeper" \
    -c "SELECT slot FROM cosid.acquire('default', 'holder', gen_random_uuid(), 60000, 0)" >/dev/null
out=$(q -U keeper_k -c "SET cosid.store_clock_offset = 3600000" \
    -c "SELECT 'shift ' || (cosid.store_now() - floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint > 60000)" \
    -c "SELECT 'slot ' || slot FROM cosid.acquire('default', 'thief', gen_random_uuid(), 1000, 0)" 2>&1 || true)
sed 's/^/#   /' <<<"$out"
check "a keeper role's SET of the placeholder does not move the store's clock" 1 "$(grep -c '^shift false' <<<"$out")"
check "... nor lets it take the live lease on slot 0" 0 "$(grep -c '^slot 0$' <<<"$out")"
check "slot 0 is still the holder's" holder "$(q -c "SELECT owner_key FROM cosid.lease WHERE namespace = 'default' AND slot = 0")"
assert_store_verified "$dir" "$port" postgres "the store without preload (the holder's window)"
node_stop main

# Preloaded, store in database 'postgres', extension not created there yet (a new user's
# first run in an application database): CREATE EXTENSION there warns, and a call fails at
# once, saying why, instead of waiting out cosid.acquire_timeout (test/e2e/databases.sh has
# the rest).
node_up main "$dir" "$port" "cosid.database = 'postgres'"
q -c "CREATE DATABASE other" >/dev/null
out=$(node_sql_db main other -c "CREATE EXTENSION cosid" 2>&1)
grep -E 'WARNING|HINT' <<<"$out" | sed 's/^/#   /'
check "CREATE EXTENSION outside cosid.database warns, naming the keeper's database" 1 \
    "$(grep -c 'WARNING:  cosid.s lease keeper works in database "postgres", not in "other"' <<<"$out")"
sleep 1.5   # the keeper has looked for the extension in its database
t0=$(now_ms)
# (a timeout of 10 min: "at once" is then told from "after the timeout" by a wide margin on a
# loaded machine, where the call once took 6.8 s)
out=$(node_sql_db main other -v VERBOSITY=verbose -c "SET cosid.acquire_timeout = '10min'" -c "SELECT cosid_next()" 2>&1 || true)
elapsed=$(( $(now_ms) - t0 ))
grep -E 'ERROR|DETAIL|HINT' <<<"$out" | sed 's/^/#   /'
check "cosid_next in another database before the store exists: ZC006 saying the keeper cannot serve" 1 \
    "$(grep -c 'ERROR:  ZC006: cosid lease keeper cannot serve yet' <<<"$out")"
check "... naming what is missing" 1 "$(grep -c 'extension cosid is not installed in database "postgres"' <<<"$out")"
check "... with a HINT naming the store's database" 1 "$(grep -c 'Run CREATE EXTENSION cosid in database \"postgres\"' <<<"$out")"
check_true "... at once, not after cosid.acquire_timeout (10 min): $elapsed ms" "$([ "$elapsed" -lt 60000 ] && echo t)"
# the transaction that creates the extension in the keeper's database cannot use it yet
out=$(q -v VERBOSITY=verbose -c "BEGIN" -c "CREATE EXTENSION cosid" \
      -c "SET cosid.acquire_timeout = '30s'" -c "SELECT cosid_next()" 2>&1 || true)
grep -E 'ERROR|HINT' <<<"$out" | sed 's/^/#   /'
check "cosid_next in the transaction that created the extension: 55000, commit first" 1 \
    "$(grep -c 'ERROR:  55000: cosid_next() cannot run in the transaction that created the extension cosid' <<<"$out")"
out=$(q -c "CREATE EXTENSION cosid" -c "SET cosid.acquire_timeout = '5s'" -c "SELECT cosid_next() > 0" 2>&1 || true)
check "cosid_next once the extension exists (committed)" "t" "$(tail -1 <<<"$out")"
check "and in the other database now" "t" "$(node_sql_db main other -c "SELECT cosid_next() > 0" 2>&1)"
assert_store_verified "$dir" "$port" postgres "the store in database postgres"
node_stop main

# cosid.database names a database that does not exist yet: the keeper backs off (one log
# entry per attempt, 1, 2, 4 ... s apart, not one per second), says what to do, and finds
# the database once it is created.
node_up main "$dir" "$port" "cosid.database = 'later'"
sleep 8
fatals=$(grep -c 'FATAL:  database "later" does not exist' "$dir/server.log" || true)
echo "# keeper starts that failed in 8 s: $fatals"
check_true "the keeper backs off: at most 5 failed starts in 8 s (one per second without)" \
    "$([ "$fatals" -ge 2 ] && [ "$fatals" -le 5 ] && echo t)"
check_true "the log says what to do" "$(grep -q 'HINT:  Create database "later" and run CREATE EXTENSION cosid there' "$dir/server.log" && echo t)"
q -c "CREATE EXTENSION cosid" 2>/dev/null
out=$(q -v VERBOSITY=verbose -c "SET cosid.acquire_timeout = '30s'" -c "SELECT cosid_next()" 2>&1 || true)
grep -E 'ERROR|DETAIL' <<<"$out" | sed 's/^/#   /'
check "meanwhile cosid_next fails at once: the keeper cannot connect to its database" 1 \
    "$(grep -c 'ERROR:  ZC006: cosid lease keeper cannot connect to database "later"' <<<"$out")"
q -c "CREATE DATABASE later" >/dev/null
node_sql_db main later -c "CREATE EXTENSION cosid" >/dev/null
out=$(node_sql_db main later -c "SET cosid.acquire_timeout = '40s'" -c "SELECT cosid_next() > 0" 2>&1 || true)
check "cosid_next works once the database exists" "t" "$(tail -1 <<<"$out")"
grep -o 'cosid keeper started in database "later"' "$dir/server.log" | sed 's/^/# /'

# A hot standby of that server: no keeper runs there, so cosid_next() says so at once.
standby="$dir/standby"; sport=55448
mkdir -p "$standby"; chown "$PG_USER" "$standby"
# (no replication slot: node_standby's needs one)
as_pg "$PG_BIN/pg_basebackup" -h "$(node_dir main)" -p "$(node_port main)" -D "$standby/data" -R -X stream -c fast >/dev/null
node_attach standby "$standby" "$sport"
node_start standby
out=$(node_sql_db standby later -v VERBOSITY=verbose -c "SET cosid.acquire_timeout = '30s'" -c "SELECT cosid_next()" 2>&1 || true)
grep -E 'ERROR|HINT' <<<"$out" | sed 's/^/#   /'
check "cosid_next() on a hot standby: 25006 at once, not after the acquire timeout" 1 \
    "$(grep -c 'ERROR:  25006: cosid_next() cannot run during recovery' <<<"$out")"
check "cosid_parse works on the standby" 1 "$(node_sql_db standby later -c "SELECT (cosid_parse(4194304 + 4096)).slot")"
assert_store_verified "$dir" "$port" later "the store in database later"
exit $FAIL
