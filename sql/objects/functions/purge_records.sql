-- Retention of records: SUCCESS and FAILED records not updated within the age are deleted, oldest
-- first, each leaving its tombstone in idem.retired_keys. At most p_limit of them (NULL: all), so
-- a caller can run a large retention as many short transactions (idemctl purge does, passing each
-- batch's next_from, the newest updated_at it deleted, as the next one's p_from): each holds
-- retention's advisory lock, which sends the begins meanwhile down their checked path, and the
-- rows it deletes, only for its own batch. In a batch, a record a writer holds at that moment is
-- skipped, not waited for, and the next batch or purge finds it again if it is still settled and
-- old; all at once, the purge waits for it as it always did.

CREATE OR REPLACE FUNCTION idem.purge_records(
    p_older_than interval,
    p_limit integer DEFAULT NULL,
    p_from timestamptz DEFAULT NULL,
    OUT records_deleted bigint,
    OUT tombstones_written bigint,
    OUT next_from timestamptz)
 RETURNS record
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
 SET lock_timeout TO '10s'
 -- Planned for each call's own age and batch: a plan cached for any age could scan every record
 -- to sort them, where the oldest are first in records_by_updated.
 SET plan_cache_mode TO 'force_custom_plan'
AS $function$
DECLARE
    v_cutoff timestamptz;
BEGIN
    IF p_older_than IS NULL OR p_older_than <= interval '0' THEN
        RAISE EXCEPTION 'purge needs a positive age, got %',
            coalesce(p_older_than::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_limit IS NOT NULL AND p_limit < 1 THEN
        RAISE EXCEPTION 'purge needs a batch of at least one record, got %', p_limit
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_cutoff := now() - p_older_than;
    -- Exclusive against begin's shared hold (see idem.begin): waits for the begins in flight,
    -- and begins that arrive meanwhile check their inserts the slow way.
    PERFORM pg_advisory_xact_lock(7347261900532);
    IF p_limit IS NULL THEN
        -- All at once (idem.purge): a record a concurrent begin re-claims is locked by it; the
        -- DELETE waits (up to the lock_timeout), re-checks the status and leaves the now
        -- PROCESSING record alone.
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
    ELSE
        -- A batch: a record a writer holds is skipped, not waited for (once that writer commits
        -- it is PROCESSING, or a later batch finds it). Locking re-checks the status and age of a
        -- row changed since the scan.
        -- The batch's keys as an array: the DELETE then probes the primary key for each, where a
        -- join with the batch would be planned as a scan of every record. The scan starts at
        -- p_from, the previous batch's next_from: the index entries of the rows earlier batches
        -- deleted stay until vacuum, and reading past them again in every batch made a long
        -- retention quadratic.
        WITH gone AS (
            DELETE FROM idem.records AS r
             WHERE r.idempotency_key = ANY (ARRAY(
                       SELECT b.idempotency_key FROM idem.records AS b
                        WHERE b.status IN ('SUCCESS', 'FAILED') AND b.updated_at < v_cutoff
                          AND b.updated_at >= coalesce(p_from, '-infinity')
                        ORDER BY b.updated_at
                        LIMIT p_limit
                          FOR UPDATE SKIP LOCKED))
            RETURNING r.idempotency_key, r.biz_type, r.biz_id, r.request_hash, r.status,
                      r.updated_at),
        written AS (
            INSERT INTO idem.retired_keys AS t (idempotency_key, biz_type, biz_id, request_hash, status)
            SELECT g.idempotency_key, g.biz_type, g.biz_id, g.request_hash, g.status FROM gone AS g
            ON CONFLICT (idempotency_key) DO UPDATE
               SET biz_type = excluded.biz_type, biz_id = excluded.biz_id,
                   request_hash = excluded.request_hash, status = excluded.status,
                   retired_at = excluded.retired_at
            RETURNING 1)
        SELECT (SELECT count(*) FROM written), (SELECT max(g.updated_at) FROM gone AS g)
          INTO tombstones_written, next_from;
    END IF;
    records_deleted := tombstones_written;
END
$function$;

COMMENT ON FUNCTION idem.purge_records(interval, integer, timestamptz) IS
    'Retention of records: deletes up to the limit (NULL: all) of the SUCCESS and FAILED records not updated within the age (and, in a batch, not before p_from), oldest first, each leaving its tombstone in idem.retired_keys; a batch skips records a writer holds. Returns records_deleted, tombstones_written and, for a batch, next_from (the newest updated_at it deleted: the next batch''s p_from). Run by the owner; idemctl purge calls it in batches, each its own transaction.';
