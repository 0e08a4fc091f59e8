#!/usr/bin/env bash
# The main job, from nothing: build and install cosid, start a throwaway PostgreSQL with
# cosid preloaded, create a table whose id is DEFAULT cosid_next('default'), insert rows from
# several connections, and show the ids, the leases in the store and this instance's pool.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
install_prerequisites
build_and_install

dir=/tmp/cosid-demo; port=55439
log "starting a throwaway PostgreSQL 15 in $dir (port $port) with shared_preload_libraries = 'cosid'"
start_server "$dir" "$port" "cosid.ttl = '30s'"
trap 'stop_server "$dir"; echo "(server stopped; its files are in $dir)"' EXIT
q() { psql_at "$dir" "$port" postgres "$@"; }

log "CREATE EXTENSION cosid; CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT cosid_next('default'), ...)"
q -c "CREATE EXTENSION cosid" \
  -c "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT cosid_next('default'), note text, at timestamptz DEFAULT clock_timestamp())"

log "inserting 100000 rows in one statement, then 4 connections at once, each inserting 1000 rows in two halves a second apart"
q -c "INSERT INTO orders(note) SELECT 'bulk ' || g FROM generate_series(1, 100000) g"
for c in 1 2 3 4; do
    q -c "INSERT INTO orders(note) SELECT 'client $c row ' || g FROM generate_series(1, 500) g" \
      -c "SELECT pg_sleep(1)" -o /dev/null \
      -c "INSERT INTO orders(note) SELECT 'client $c row ' || g FROM generate_series(501, 1000) g" &
done
wait
echo "(every connection issues from the instance's one lease: one slot, ids increasing in issue order across connections)"

log "the ids: unique, time-ordered, each one (timestamp, slot, sequence)"
q -c "SELECT count(*) AS rows, count(DISTINCT id) AS distinct_ids, min(id), max(id) FROM orders"
q -c "SELECT o.id, o.note, p.ts, p.slot, p.sequence FROM orders o, cosid_parse(o.id) p
      WHERE o.note IN ('bulk 1', 'bulk 2', 'bulk 100000', 'client 1 row 1', 'client 2 row 1', 'client 3 row 1', 'client 4 row 1')
      ORDER BY o.id"
q -c "SELECT p.slot, count(*) AS ids FROM orders, cosid_parse(orders.id) p GROUP BY 1 ORDER BY 1"

log "reading ids: their text forms, and the rows of a time range through the primary key"
q -c "SELECT id, cosid_to_text(id) AS base62, cosid_format(id) AS for_people FROM orders ORDER BY id LIMIT 3"
q -c "SELECT count(*) AS rows_of_the_last_minute FROM orders
      WHERE id BETWEEN cosid_min_id(now() - interval '1 minute') AND cosid_max_id(clock_timestamp())"

log "the lease in the store: the slot held by this instance for a window (floor, ceiling]"
q -c "SELECT namespace, slot, owner_key, fence, expires_at, floor_at, ceiling_at, state FROM cosid_leases() WHERE state <> 'free'"
q -c "SELECT * FROM cosid_owners"
log "this instance's pool: its lease, how many backends use it, and the last id issued on it"
q -c "SELECT * FROM cosid_pool()"
q -c "SELECT * FROM cosid_stats()" -x
log "its health: one row per check, ok / warning / critical, with what to do (docs/monitoring.md)"
q -c "SELECT name, status, detail FROM cosid_health()"
