#!/usr/bin/env bash
# A raise by a store whose clock is a little behind the one that answered before it (a
# promoted standby whose clock is 0.9 s behind the old primary's, within max_tolerance 1 s: a
# case the raise itself covers).  The keeper tells a lease the raise freed from one revoked by
# `raised_at > seen_at` (store_state.raised_at_ms against the store time of its last answer
# holding the lease): with the new clock behind, a raise within that skew after the last
# renewal's answer looks older than that answer, the lease counts as lost (not freed by the
# raise), and every backend on it fails once with ZC001, where the raise alone asks for no
# error at all (raised_floor_wait.sh).  Here the store is the server itself: its clock is set
# 0.9 s back (cosid.store_clock_offset) just before the raise; renewals come every 333 ms
# (cosid.ttl 1 s), so the last answer is always within the skew.
# Ports 57411.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/faults.sh"
base="${1:-/tmp/cosid-e2e}/raise_clock_behind"
DIR="$base"; PORT=57411
trap 'node_stop_all immediate' EXIT
node_up main "$DIR" "$PORT" "cosid.ttl = '1s'" "cosid.acquire_timeout = '10s'"
q -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_ttl => '1s', max_tolerance => '1s')" \
  -c "SELECT cosid_namespace_create('w', tolerance => '1s')" \
  -c "CREATE TABLE ids (n serial PRIMARY KEY, at timestamptz NOT NULL, id bigint, err text)" >/dev/null
for try in 1 2 3; do
    off=$([ $try = 1 ] && echo 0 || echo -900)  # try 1: the control, the clock unchanged
    q -c "TRUNCATE ids" -c "ALTER SYSTEM RESET cosid.store_clock_offset" -c "SELECT pg_reload_conf()" >/dev/null
    # a client issuing every 20 ms for about 4 s, recording any error instead of stopping
    q -c "DO \$\$ BEGIN
            FOR i IN 1..200 LOOP
                BEGIN
                    INSERT INTO ids (at, id) VALUES (clock_timestamp(), cosid_next('w'));
                EXCEPTION WHEN OTHERS THEN
                    INSERT INTO ids (at, err) VALUES (clock_timestamp(), SQLSTATE);
                END;
                COMMIT;
                PERFORM pg_sleep(0.02);
            END LOOP;
          END \$\$" > "$DIR/client.log" 2>&1 &
    client=$!
    wait_for 20 "the client's first 30 ids" q -c "SELECT count(*) >= 30 FROM ids" >/dev/null
    # the store's clock steps 0.9 s back (a new primary behind the old one; try 1: not), and it raises
    q -c "ALTER SYSTEM SET cosid.store_clock_offset = $off" -c "SELECT pg_reload_conf()" >/dev/null 2>&1
    raise_store_floors -c "SET cosid.store_clock_offset = $off"
    wait "$client" || true
    errs=$(q -c "SELECT coalesce(string_agg(DISTINCT err, ','), '') FROM ids WHERE err IS NOT NULL")
    echo "# try $try (store clock offset $off ms): $(q -c "SELECT count(id) || ' ids, ' || count(err) || ' errors' FROM ids") ${errs:+($errs)}"
    check "try $try: the client issues through the raise without an error" "" "$errs"
done
check "the keeper logged no lease as lost (each was freed by a raise)" 0 \
    "$(grep -c 'was lost$\|was lost"' "$DIR/server.log" || true)"
exit $FAIL
