-- PROCESSING past its lease: the caller crashed or hung, and the side effect may have happened.
-- It becomes UNKNOWN, for a reconciler or a person, never for an automatic re-run. Rows a caller
-- is changing right now are skipped, which also keeps two concurrent sweeps from deadlocking.

CREATE OR REPLACE FUNCTION idem.expire_leases()
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_count integer;
    v_ctx   text;
BEGIN
    -- The history's day partitions two days ahead (idem.prepare_history_partitions): a catalog
    -- probe each sweep, the work about once a day. A failure to make them fails no sweep: rows go
    -- to the DEFAULT partition meanwhile.
    IF pg_catalog.to_regclass('idem.transitions_p'
                              || to_char((now() AT TIME ZONE 'UTC')::date + 2, 'YYYYMMDD')) IS NULL THEN
        BEGIN
            PERFORM idem.prepare_history_partitions();
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'expire_leases: the history''s day partitions were not made: %', SQLERRM;
        END;
    END IF;
    v_ctx := idem.act('system', 'lease expired', '');
    UPDATE idem.records AS r
       SET status = 'UNKNOWN', last_error = 'lease expired at ' || r.lease_expires_at::text
     WHERE r.idempotency_key IN (
               SELECT x.idempotency_key FROM idem.records AS x
                WHERE x.status = 'PROCESSING' AND x.lease_expires_at < now()
                FOR UPDATE SKIP LOCKED)
       AND r.status = 'PROCESSING' AND r.lease_expires_at < now();
    GET DIAGNOSTICS v_count = ROW_COUNT;
    v_ctx := idem.act('', '', '');
    RETURN v_count;
END
$function$;

COMMENT ON FUNCTION idem.expire_leases() IS
    'PROCESSING past its lease becomes UNKNOWN (actor kind system), for the reconciler or a person, never an automatic re-run; returns how many. Rows being changed right now are skipped.';
