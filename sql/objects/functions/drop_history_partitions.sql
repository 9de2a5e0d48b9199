-- Retention of the history (idem.attempts, idem.transitions) by whole partitions: every range
-- partition that ends before the cutoff is dropped. Rows in it of a key whose record is still
-- there and not SUCCESS (PROCESSING, UNKNOWN, FAILED: open, or closed too recently to go) are
-- kept: copied into the DEFAULT partition, ids and all, before the partition goes. The DEFAULT
-- partition itself (such kept rows, and rows written while no day partition existed) is trimmed
-- by the row rule. Returns how many rows of each table are gone. Called by idem.purge_history.
--
-- The work is read first, unlocked. Then both tables are locked at once, until the caller's
-- transaction commits: writers wait for the kept rows' copy, the drops and the DEFAULT
-- partitions' trim (a few rows: the kept history of open records). Trimmed before the lock, the
-- trim's reads of idem.records made claims committing meanwhile fail to serialize at
-- SERIALIZABLE; under the lock no claim runs beside it.

CREATE OR REPLACE FUNCTION idem.drop_history_partitions(
    p_cutoff timestamptz,
    OUT attempts_gone bigint,
    OUT transitions_gone bigint)
 RETURNS record
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    t       text;
    v_part  text;
    v_parts text[];
    v_all   text[] := '{}';
    v_end   timestamptz;
    v_total bigint;
    v_kept  bigint;
    v_gone  bigint;
    v_try   integer := 0;
    v_locked boolean := false;
    v_old_timeout text;
BEGIN
    attempts_gone := 0;
    transitions_gone := 0;
    CREATE TEMP TABLE IF NOT EXISTS kept_keys (idempotency_key text PRIMARY KEY) ON COMMIT DROP;
    TRUNCATE kept_keys;
    SELECT max(idem.history_partition_end(c.relname)) INTO v_end
      FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
     WHERE i.inhparent IN ('idem.attempts'::regclass, 'idem.transitions'::regclass)
       AND idem.history_partition_end(c.relname) <= p_cutoff;
    IF v_end IS NOT NULL THEN
        -- The keys whose history stays: a record not SUCCESS. A key's history starts with its
        -- record (begin writes both at once), so only records created before the newest
        -- partition's end can have rows in these partitions; once retention removed the old
        -- closed ones, they are few, and a partition is read only for them.
        INSERT INTO kept_keys
        SELECT r.idempotency_key FROM idem.records AS r
         WHERE r.created_at < v_end AND r.status <> 'SUCCESS';
        ANALYZE kept_keys;
    END IF;
    FOREACH t IN ARRAY ARRAY['attempts', 'transitions'] LOOP
        EXECUTE format('CREATE TEMP TABLE IF NOT EXISTS %I (LIKE idem.%I) ON COMMIT DROP', 'kept_' || t, t);
        EXECUTE format('TRUNCATE %I', 'kept_' || t);
        SELECT coalesce(array_agg(c.relname ORDER BY c.relname), '{}') INTO v_parts
          FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
         WHERE i.inhparent = format('idem.%I', t)::regclass
           AND idem.history_partition_end(c.relname) <= p_cutoff;
        v_gone := 0;
        FOREACH v_part IN ARRAY v_parts LOOP
            EXECUTE format('SELECT count(*) FROM idem.%I', v_part) INTO v_total;
            EXECUTE format('INSERT INTO %I SELECT h.* FROM idem.%I AS h '
                           ' WHERE h.idempotency_key IN (SELECT k.idempotency_key FROM kept_keys AS k)',
                           'kept_' || t, v_part);
            GET DIAGNOSTICS v_kept = ROW_COUNT;
            v_gone := v_gone + v_total - v_kept;
        END LOOP;
        IF t = 'attempts' THEN attempts_gone := v_gone; ELSE transitions_gone := v_gone; END IF;
        v_all := v_all || v_parts;
    END LOOP;

    IF cardinality(v_all) > 0 THEN
        -- A writer's statement holds both tables from its start, and one may be waiting for a
        -- record this purge has deleted: so the lock is asked for briefly, a few times, and the
        -- days are left for the next purge rather than kept waiting (a writer queued behind the
        -- request waits at most that long).
        v_old_timeout := current_setting('lock_timeout');
        PERFORM set_config('lock_timeout', '200ms', true);
        LOOP
            BEGIN
                LOCK TABLE idem.attempts, idem.transitions IN ACCESS EXCLUSIVE MODE;
                v_locked := true;
                EXIT;
            EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
                v_try := v_try + 1;
                EXIT WHEN v_try >= 5;
                PERFORM pg_sleep(0.1 * v_try);
            END;
        END LOOP;
        PERFORM set_config('lock_timeout', v_old_timeout, true);
        IF NOT v_locked THEN
            RAISE WARNING 'purge: % history partitions older than % were left for the next purge: writers held the history tables',
                cardinality(v_all), p_cutoff;
            attempts_gone := 0;
            transitions_gone := 0;
            v_all := '{}';
        END IF;
        FOREACH t IN ARRAY ARRAY['attempts', 'transitions'] LOOP
            CONTINUE WHEN NOT v_locked;
            FOREACH v_part IN ARRAY v_all LOOP
                CONTINUE WHEN NOT starts_with(v_part, t || '_');
                EXECUTE format('ALTER TABLE idem.%I DETACH PARTITION idem.%I', t, v_part);
                EXECUTE format('DROP TABLE idem.%I', v_part);
            END LOOP;
            -- No range covers them now: they go to the DEFAULT partition.
            EXECUTE format('INSERT INTO idem.%I SELECT * FROM %I', t, 'kept_' || t);
        END LOOP;
    END IF;

    -- What the DEFAULT partitions hold: the row rule, as before partitions.
    FOREACH t IN ARRAY ARRAY['attempts', 'transitions'] LOOP
        EXECUTE format('DELETE FROM idem.%I AS h WHERE h.created_at < $1 '
                       '   AND NOT EXISTS (SELECT 1 FROM idem.records AS r '
                       '                    WHERE r.idempotency_key = h.idempotency_key AND r.status <> ''SUCCESS'')',
                       t || '_outside') USING p_cutoff;
        GET DIAGNOSTICS v_gone = ROW_COUNT;
        IF t = 'attempts' THEN
            attempts_gone := attempts_gone + v_gone;
        ELSE
            transitions_gone := transitions_gone + v_gone;
        END IF;
    END LOOP;
END
$function$;

COMMENT ON FUNCTION idem.drop_history_partitions(timestamptz) IS
    'Retention of idem.attempts and idem.transitions by whole partitions ending before the cutoff, keeping (in the DEFAULT partition) the rows of keys whose record is not SUCCESS; returns how many rows of each are gone. Called by idem.purge_history.';
