-- A default cosid_next() is bound to its namespace when it is made (issue 31, item 4): the
-- event trigger cosid_bind_defaults rewrites it into cosid_next('<namespace>'), the namespace
-- this session issues in without a SET; a SET of cosid.namespace never reaches a column.
-- Namespace 'bw' has 53-bit ids and 'default' 63-bit ones, so an id says where it was issued.
SELECT cosid_namespace_create('bw', slot_bits => 4, sequence_bits => 8, total_bits => 53);
CREATE FUNCTION ns_of(id bigint) RETURNS text LANGUAGE sql AS
$$ SELECT CASE WHEN id < 2^53 THEN 'bw' ELSE 'default' END $$;
CREATE FUNCTION default_of(tbl regclass, col name) RETURNS text LANGUAGE sql AS
$$ SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d JOIN pg_attribute a
   ON a.attrelid = d.adrelid AND a.attnum = d.adnum WHERE d.adrelid = tbl AND a.attname = col $$;
SELECT evtname, evtevent, evtenabled FROM pg_event_trigger WHERE evtname = 'cosid_bind_defaults';

-- 1. CREATE TABLE: the catalog names the namespace.
CREATE TABLE b_plain (id bigint PRIMARY KEY DEFAULT cosid_next(), n bigint DEFAULT -cosid_next(), note text DEFAULT 'cosid_next()');
SELECT default_of('b_plain', 'id') AS id_default, default_of('b_plain', 'n') AS n_default,
       default_of('b_plain', 'note') AS note_default;

-- 2. A session's SET reaches no bound column: every row issued in 'default'.
SET cosid.namespace = 'bw';
INSERT INTO b_plain(note) SELECT 'set' FROM generate_series(1, 100);
SELECT count(*) FILTER (WHERE ns_of(id) = 'default') AS rows_in_default, count(*) AS rows FROM b_plain;
-- A direct call reads the setting when it runs (not a default: nothing binds it).
SELECT ns_of(cosid_next()) AS direct_call_issues_in;
-- Making a default under a SET is refused rather than guessed (a pooler may have carried it).
SELECT expect_error($$CREATE TABLE b_refused (id bigint DEFAULT cosid_next())$$);
SELECT error_detail($$CREATE TABLE b_refused (id bigint DEFAULT cosid_next())$$);
SELECT expect_error($$ALTER TABLE b_plain ALTER COLUMN n SET DEFAULT cosid_next()$$);
SELECT to_regclass('b_refused') AS not_created, default_of('b_plain', 'n') AS n_default_unchanged;
-- A default that names its namespace is made as written, SET or not.
CREATE TABLE b_named (id bigint PRIMARY KEY DEFAULT cosid_next('bw'));
SELECT default_of('b_named', 'id') AS named_default;
RESET cosid.namespace;
BEGIN;
SET LOCAL cosid.namespace = 'bw';
SELECT expect_error($$CREATE TABLE b_local (id bigint DEFAULT cosid_next())$$);
ROLLBACK;
SELECT set_config('cosid.namespace', 'bw', false) AS set_by_function;
SELECT expect_error($$CREATE TABLE b_func (id bigint DEFAULT cosid_next())$$);
RESET cosid.namespace;

-- 3. ALTER TABLE ... SET DEFAULT, ADD COLUMN (existing rows filled in the bound namespace).
CREATE TABLE b_alter (id bigint, v int);
INSERT INTO b_alter(v) SELECT g FROM generate_series(1, 10) g;
ALTER TABLE b_alter ALTER COLUMN id SET DEFAULT cosid_next();
ALTER TABLE b_alter ADD COLUMN extra bigint DEFAULT cosid_next();
SELECT default_of('b_alter', 'id') AS id_default, default_of('b_alter', 'extra') AS extra_default;
SELECT count(*) AS filled, count(*) FILTER (WHERE ns_of(extra) = 'default') AS in_default FROM b_alter;

-- 4. Partitions and inherited children: copied from the parent, made on their own, or set
-- on the parent (recursing to every child).
CREATE TABLE b_parted (id bigint DEFAULT cosid_next(), k int) PARTITION BY LIST (k);
CREATE TABLE b_part1 PARTITION OF b_parted FOR VALUES IN (1);
CREATE TABLE b_part2 (id bigint DEFAULT cosid_next(), k int);
ALTER TABLE b_parted ATTACH PARTITION b_part2 FOR VALUES IN (2);
CREATE TABLE b_part3 PARTITION OF b_parted (id DEFAULT cosid_next()) FOR VALUES IN (3);
SELECT c::text AS tbl, default_of(c, 'id') FROM unnest(ARRAY['b_parted', 'b_part1', 'b_part2', 'b_part3']::regclass[]) c;
ALTER TABLE b_parted ALTER COLUMN id DROP DEFAULT;
ALTER TABLE b_parted ALTER COLUMN id SET DEFAULT cosid_next();
SELECT c::text AS tbl, default_of(c, 'id') FROM unnest(ARRAY['b_parted', 'b_part1', 'b_part2', 'b_part3']::regclass[]) c;
CREATE TABLE b_parent (id bigint DEFAULT cosid_next());
CREATE TABLE b_child (extra int) INHERITS (b_parent);
CREATE TABLE b_child_own (id bigint DEFAULT cosid_next() + 0) INHERITS (b_parent);
SELECT default_of('b_child', 'id') AS child_default, default_of('b_child_own', 'id') AS child_own_default;
SET cosid.namespace = 'bw';
INSERT INTO b_parted(k) VALUES (1), (2), (3);
INSERT INTO b_child DEFAULT VALUES;
SELECT count(*) FILTER (WHERE ns_of(id) = 'default') AS in_default, count(*) AS rows
FROM (SELECT id FROM b_parted UNION ALL SELECT id FROM b_child) s;
RESET cosid.namespace;

-- 5. LIKE ... INCLUDING DEFAULTS, CREATE SCHEMA with its tables, a temporary table.
CREATE TABLE b_like (LIKE b_plain INCLUDING DEFAULTS);
CREATE SCHEMA b_schema CREATE TABLE t (id bigint DEFAULT cosid_next());
CREATE TEMPORARY TABLE b_temp (id bigint DEFAULT cosid_next());
CREATE FOREIGN DATA WRAPPER b_fdw;
CREATE SERVER b_server FOREIGN DATA WRAPPER b_fdw;
CREATE FOREIGN TABLE b_foreign (id bigint DEFAULT cosid_next()) SERVER b_server;
SELECT default_of('b_like', 'id') AS like_default, default_of('b_schema.t', 'id') AS schema_default,
       default_of('b_temp', 'id') AS temp_default, default_of('b_foreign', 'id') AS foreign_default;

-- 6. A domain's default, and a column of the domain.
CREATE DOMAIN b_id AS bigint DEFAULT cosid_next();
CREATE DOMAIN b_id2 AS bigint;
ALTER DOMAIN b_id2 SET DEFAULT cosid_next();
SELECT typname, typdefault FROM pg_type WHERE typname IN ('b_id', 'b_id2') ORDER BY 1;
CREATE TABLE b_dom (id b_id, v int);
SET cosid.namespace = 'bw';
INSERT INTO b_dom(v) VALUES (1);
SELECT ns_of(id) AS domain_default_issues_in FROM b_dom;
RESET cosid.namespace;

-- 7. A view's column default.
CREATE VIEW b_view AS SELECT id, note FROM b_plain;
ALTER VIEW b_view ALTER COLUMN id SET DEFAULT cosid_next();
SELECT default_of('b_view', 'id') AS view_default;
SET cosid.namespace = 'bw';
INSERT INTO b_view(note) VALUES ('through the view');
SELECT ns_of(id) AS view_default_issues_in FROM b_plain WHERE note = 'through the view';
RESET cosid.namespace;

-- 8. ALTER DATABASE / ALTER ROLE ... SET cosid.namespace take a new connection: they are
-- checked in test/e2e/bind_defaults.sh.
CREATE ROLE b_role;
GRANT CREATE ON SCHEMA public TO b_role;

-- 9. A default hidden in a function is not bound: it reads the setting when it runs.
CREATE FUNCTION b_new_id() RETURNS bigint LANGUAGE sql VOLATILE AS 'SELECT cosid_next()';
CREATE TABLE b_hidden (id bigint DEFAULT b_new_id());
SELECT default_of('b_hidden', 'id') AS hidden_default;
SET cosid.namespace = 'bw';
INSERT INTO b_hidden DEFAULT VALUES;
SELECT ns_of(id) AS hidden_default_issues_in FROM b_hidden;
RESET cosid.namespace;

-- 10. No default of this database is left unbound, and an ordinary role's tables are bound too.
SET ROLE b_role;
CREATE TABLE b_role_t2 (id bigint DEFAULT cosid_next());
RESET ROLE;
SELECT default_of('b_role_t2', 'id') AS ordinary_role_default;
SELECT count(*) AS unbound_defaults FROM pg_depend
WHERE refobjid = 'cosid_next()'::regprocedure AND classid IN ('pg_attrdef'::regclass, 'pg_type'::regclass);
SELECT cosid.bind_defaults() AS bound_now;

DROP TABLE b_role_t2;
REVOKE CREATE ON SCHEMA public FROM b_role;
DROP ROLE b_role;
DROP SCHEMA b_schema CASCADE;
DROP VIEW b_view;
DROP TABLE b_plain, b_named, b_alter, b_parted, b_parent CASCADE;
DROP TABLE b_like, b_dom, b_hidden, b_temp;
DROP DOMAIN b_id;
DROP DOMAIN b_id2;
DROP FUNCTION b_new_id();
DROP FOREIGN DATA WRAPPER b_fdw CASCADE;
