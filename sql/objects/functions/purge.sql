CREATE OR REPLACE FUNCTION idem.purge(
    p_older_than interval,
    OUT records_deleted bigint,
    OUT attempts_deleted bigint,
    OUT transitions_deleted bigint,
    OUT tombstones_written bigint)
 RETURNS record
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET lock_timeout TO '10s'
AS $function$
DECLARE
    v_cutoff timestamptz;
BEGIN
    IF p_older_than IS NULL OR p_older_than <= interval '0' THEN
        RAISE EXCEPTION 'purge needs a positive age, got %',
            coalesce(p_older_than::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_cutoff := now() - p_older_than;
    -- Exclusive against begin's shared hold (see idem.begin): waits for the begins in flight,
    -- and begins that arrive meanwhile check their inserts the slow way.
    PERFORM pg_advisory_xact_lock(7347261900532);
    -- A record a concurrent begin re-claims is locked by it; the DELETE waits, re-checks the status
    -- and leaves the now PROCESSING record alone.
    WITH gone AS (
        DELETE FROM idem.records AS r
         WHERE r.status IN ('SUCCESS', 'FAILED') AND r.updated_at < v_cutoff
        RETURNING r.idempotency_key, r.biz_type, r.biz_id, r.request_hash, r.status)
    INSERT INTO idem.retired_keys AS t (idempotency_key, biz_type, biz_id, request_hash, status)
    SELECT g.idempotency_key, g.biz_type, g.biz_id, g.request_hash, g.status FROM gone AS g
    ON CONFLICT (idempotency_key) DO UPDATE
       SET biz_type = excluded.biz_type, biz_id = excluded.biz_id,
           request_hash = excluded.request_hash, status = excluded.status,
           retired_at = excluded.retired_at;
    GET DIAGNOSTICS tombstones_written = ROW_COUNT;
    records_deleted := tombstones_written;

    -- The history goes a day at a time (migration 017): a partition whose whole range is older
    -- than the age is dropped, after the rows of keys still open (a record neither SUCCESS nor
    -- gone) are copied to the DEFAULT partition. They are found before the tables are locked;
    -- the lock then lasts from the drops to this purge's commit. A SUCCESS record never changes
    -- again and a retired key never runs again, so no key becomes open meanwhile.
    SELECT d.attempts_gone, d.transitions_gone INTO attempts_deleted, transitions_deleted
      FROM idem.drop_history_partitions(v_cutoff) AS d;
    PERFORM idem.prepare_history_partitions();
END
$function$;

COMMENT ON FUNCTION idem.purge(interval) IS
    'Retention (schema contract v2): removes SUCCESS/FAILED records older than the age, each leaving a tombstone in idem.retired_keys (a later begin under the key is retired; a new key for a paid business object is rejected), and the history (attempts, transitions) of keys with no record or a SUCCESS one a whole day partition at a time, once the day is older than the age; never anything of a PROCESSING, UNKNOWN or FAILED record. Returns records_deleted, attempts_deleted, transitions_deleted, tombstones_written.';
