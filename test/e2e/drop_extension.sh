#!/usr/bin/env bash
# DROP EXTENSION cosid and CREATE EXTENSION cosid again in the store's database (issue 22,
# item 2).  The drop is refused while any window or next floor of the store reaches past its
# clock, also a lease that expired but whose ceiling (expires_at + tolerance) is still
# ahead; the error says until when.  Once everything lies behind the clock it is accepted,
# and the store made again starts every slot at its now: every id after it is above every
# id before it.  Before: an expired lease with its ceiling 28 s ahead let the drop through,
# and the new store granted slot 0 from floor 0.  DROP OWNED BY the extension's owner drops
# it too, and is held the same way (before, it went through and took the lease table).
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
dir="${1:-/tmp/cosid-e2e}/drop_extension"; port=55494
node_up main "$dir" "$port" "cosid.ttl = '2s'"
keeper=""
trap '[ -n "$keeper" ] && kill -CONT "$keeper" 2>/dev/null; node_stop_all immediate' EXIT
# shellcheck disable=SC2069  # stderr to the caller, stdout discarded
err() { q -v VERBOSITY=verbose -c "$1" 2>&1 >/dev/null || true; }

q -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_tolerance => '30s')" \
  -c "SELECT cosid_namespace_create('d', slot_bits => 2, tolerance => '30s')" \
  -c "CREATE TABLE ids (id bigint PRIMARY KEY, phase text)" \
  -c "INSERT INTO ids SELECT cosid_next('d'), 'before' FROM generate_series(1, 5000)" >/dev/null

# The keeper stops renewing (SIGSTOP) until the lease has expired: its ceiling is still
# ~28 s ahead, and a renewal after expiry would still succeed.
keeper=$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'cosid keeper'")
kill -STOP "$keeper"
check_true "the lease expired, its ceiling still ahead" \
    "$(wait_until 20 q -c "SELECT state = 'expired' AND ceiling > cosid.store_now() + 20000 FROM cosid_leases('d') WHERE owner_key IS NOT NULL")"
out=$(err "DROP EXTENSION cosid")
check "DROP EXTENSION refused with 55006" "55006" "$(sqlstate_of "$out")"
ceiling_at=$(q -c "SELECT to_char(to_timestamp(ceiling / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS') FROM cosid.lease WHERE namespace = 'd' AND incarnation IS NOT NULL")
check_true "the error says until when (the ceiling, $ceiling_at UTC) and which slot" \
    "$(grep -q "DETAIL:  The last of them ends at $ceiling_at UTC (slot 0 of namespace \"d\", leased by" <<<"$out" && grep -q "HINT: .*try again after $ceiling_at UTC" <<<"$out" && echo t)"
check "the extension is still there" "1" "$(q -c "SELECT count(*) FROM pg_extension WHERE extname = 'cosid'")"
# DROP SCHEMA cosid CASCADE: PostgreSQL refuses it (the schema is a member of the extension)
out=$(err "DROP SCHEMA cosid CASCADE")
check "DROP SCHEMA cosid CASCADE refused by PostgreSQL (2BP01), the extension still there" "2BP01 1" \
    "$(sqlstate_of "$out") $(q -c "SELECT count(*) FROM pg_extension WHERE extname = 'cosid'")"
kill -CONT "$keeper"; keeper=""

# A released slot's next_floor ahead of the clock (a window that borrowed ticks) holds the
# drop too, while a released slot's old ceiling does not.
q -c "SELECT cosid_release(namespace, slot) FROM (SELECT DISTINCT namespace, slot FROM cosid_pool() WHERE slot IS NOT NULL) p" >/dev/null
check_true "released" "$(wait_until 10 q -c "SELECT count(*) = 0 FROM cosid.lease WHERE incarnation IS NOT NULL")"
# (one session for both: a loaded machine's psql start between them must not use up the 3 s)
out=$(q -v VERBOSITY=verbose \
      -c "UPDATE cosid.lease SET next_floor = cosid.store_now() + 3000 WHERE namespace = 'd' AND slot = 1" \
      -c "DROP EXTENSION cosid" 2>&1 >/dev/null || true)
check "refused while a free slot's next_floor is ahead" "55006" "$(sqlstate_of "$out")"
largest=$(q -c "SELECT max(id) FROM ids")
check_true "accepted once everything lies behind the store's clock" \
    "$(wait_until 10 q -c "DROP EXTENSION cosid" -c "SELECT true")"

# Made again (by another superuser, for the DROP OWNED case below): every slot starts at the
# store's now, above every id issued before.
q -c "CREATE ROLE ops SUPERUSER" -c "CREATE ROLE bystander" >/dev/null
q -c "SET ROLE ops" -c "CREATE EXTENSION cosid" -c "SELECT cosid_store_settings(max_tolerance => '30s')" \
  -c "SELECT cosid_namespace_create('d', slot_bits => 2, tolerance => '30s')" \
  -c "INSERT INTO ids SELECT cosid_next('d'), 'after' FROM generate_series(1, 5000)" >/dev/null
check "every id after the re-creation is above every id before it" "0" \
    "$(q -c "SELECT count(*) FROM ids WHERE phase = 'after' AND id <= $largest")"
check_true "the new store's slots started at its now" \
    "$(q -c "SELECT bool_and(floor > 0) FROM cosid.lease WHERE namespace = 'd' AND fence > 0")"
# DROP OWNED BY the role that owns the extension and its schema drops them too: refused while
# this instance's lease is live; a role that owns nothing of cosid is not held up.
out=$(err "DROP OWNED BY ops")
check "DROP OWNED BY the extension's owner refused with 55006 while a lease is live, the extension still there" "55006 1" \
    "$(sqlstate_of "$out") $(q -c "SELECT count(*) FROM pg_extension WHERE extname = 'cosid'")"
check "DROP OWNED BY a role owning nothing of cosid goes through" "" "$(err "DROP OWNED BY bystander")"
assert_store_verified "$dir" "$port" postgres "the store made again"
exit $FAIL
