-- Tombstones, on a much longer horizon than records: once removed, the key could run again.

CREATE OR REPLACE FUNCTION idem.purge_retired(p_older_than interval)
 RETURNS bigint
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_count bigint;
BEGIN
    IF p_older_than IS NULL OR p_older_than <= interval '0' THEN
        RAISE EXCEPTION 'purge_retired needs a positive age, got %',
            coalesce(p_older_than::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM idem.retired_keys AS t WHERE t.retired_at < now() - p_older_than;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$function$;

COMMENT ON FUNCTION idem.purge_retired(interval) IS
    'Removes tombstones of idem.retired_keys older than the age; returns how many. A key whose tombstone is gone may run again: use a horizon far beyond any retry.';
