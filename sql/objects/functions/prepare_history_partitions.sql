-- The day partitions of the history (idem.attempts, idem.transitions: migration 017), made ahead
-- of the days that will write them. A row no day partition covers goes to the table's DEFAULT
-- partition (<table>_outside), so a write never fails when this has not run; when it runs later,
-- the rows of a day it now makes are moved out of the DEFAULT partition into the day's own.
-- Run by idemctl migrate, idem.purge and idem.expire_leases (every minute under the packaged
-- timer); owned by idem_owner, executable by nobody else.

CREATE OR REPLACE FUNCTION idem.prepare_history_partitions(p_days_ahead integer DEFAULT 7)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    t       text;
    d       date;
    v_name  text;
    v_lo    timestamptz;
    v_hi    timestamptz;
    v_first timestamptz;
    v_made  integer := 0;
BEGIN
    IF p_days_ahead IS NULL OR p_days_ahead < 0 OR p_days_ahead > 366 THEN
        RAISE EXCEPTION 'prepare_history_partitions needs 0 to 366 days ahead, got %',
            coalesce(p_days_ahead::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOREACH t IN ARRAY ARRAY['attempts', 'transitions'] LOOP
        -- Days before the end of an upgraded database's old table are in it already.
        v_first := idem.history_partition_end(t || '_before_days');
        FOR d IN SELECT g::date FROM generate_series(
                     (now() AT TIME ZONE 'UTC')::date,
                     (now() AT TIME ZONE 'UTC')::date + p_days_ahead, interval '1 day') AS g LOOP
            v_name := t || '_p' || to_char(d, 'YYYYMMDD');
            v_lo := d::timestamp AT TIME ZONE 'UTC';
            v_hi := (d + 1)::timestamp AT TIME ZONE 'UTC';
            CONTINUE WHEN pg_catalog.to_regclass('idem.' || v_name) IS NOT NULL
                       OR (v_first IS NOT NULL AND v_lo < v_first);
            EXECUTE format('CREATE TABLE idem.%I (LIKE idem.%I INCLUDING DEFAULTS)', v_name, t);
            EXECUTE format('ALTER TABLE idem.%I ADD CONSTRAINT %I CHECK (created_at >= %L AND created_at < %L)',
                           v_name, v_name || '_day', v_lo, v_hi);
            -- Rows that arrived before their day had a partition: moved into it, same ids.
            EXECUTE format('WITH moved AS (DELETE FROM idem.%I WHERE created_at >= %L AND created_at < %L RETURNING *) '
                           'INSERT INTO idem.%I SELECT * FROM moved',
                           t || '_outside', v_lo, v_hi, v_name);
            -- SHARE UPDATE EXCLUSIVE on the table: writers go on while it is attached.
            EXECUTE format('ALTER TABLE idem.%I ATTACH PARTITION idem.%I FOR VALUES FROM (%L) TO (%L)',
                           t, v_name, v_lo, v_hi);
            EXECUTE format('ALTER TABLE idem.%I DROP CONSTRAINT %I', v_name, v_name || '_day');
            v_made := v_made + 1;
        END LOOP;
    END LOOP;
    RETURN v_made;
END
$function$;

COMMENT ON FUNCTION idem.prepare_history_partitions(integer) IS
    'Makes the day partitions (UTC) of idem.attempts and idem.transitions from today to the given days ahead (default 7) where they are missing, moving any rows of those days out of the DEFAULT partition; returns how many partitions it made.';
