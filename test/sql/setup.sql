-- Helpers for the other tests: run a statement, report its SQLSTATE, message and hint
-- (details can hold timestamps, so they are checked apart with error_detail).
CREATE FUNCTION expect_error(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    st text; msg text; hint text;
BEGIN
    EXECUTE stmt;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
    RETURN st || ': ' || msg || coalesce(' HINT: ' || nullif(hint, ''), '');
END $$;

CREATE FUNCTION error_detail(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    detail text;
BEGIN
    EXECUTE stmt;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
    RETURN detail;
END $$;

-- The keeper runs in this database (test/regress.conf).  pg_regress creates the database
-- after the server started, so the keeper may still be on its way: wait up to 20 s.
DO $$
BEGIN
    FOR i IN 1..200 LOOP
        EXIT WHEN EXISTS (SELECT 1 FROM pg_stat_activity
                          WHERE backend_type = 'cosid keeper' AND datname = current_database());
        PERFORM pg_sleep(0.1);
        PERFORM pg_stat_clear_snapshot();
    END LOOP;
END $$;
SELECT count(*) AS keepers FROM pg_stat_activity WHERE backend_type = 'cosid keeper';
SELECT extversion FROM pg_extension WHERE extname = 'cosid';
