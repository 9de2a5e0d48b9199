-- Retention of the history (idem.attempts, idem.transitions), in a transaction of its own when
-- idemctl purge runs it: the day partitions that end before the age are dropped (see
-- idem.drop_history_partitions), and the days ahead are made (usually nothing to do). The history
-- tables are locked only from the drops to this transaction's commit.

CREATE OR REPLACE FUNCTION idem.purge_history(
    p_older_than interval,
    OUT attempts_deleted bigint,
    OUT transitions_deleted bigint)
 RETURNS record
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF p_older_than IS NULL OR p_older_than <= interval '0' THEN
        RAISE EXCEPTION 'purge needs a positive age, got %',
            coalesce(p_older_than::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT d.attempts_gone, d.transitions_gone INTO attempts_deleted, transitions_deleted
      FROM idem.drop_history_partitions(now() - p_older_than) AS d;
    PERFORM idem.prepare_history_partitions();
END
$function$;

COMMENT ON FUNCTION idem.purge_history(interval) IS
    'Retention of idem.attempts and idem.transitions: drops the day partitions that end before the age, keeping the rows of keys whose record is not SUCCESS, and makes the days ahead. Returns attempts_deleted, transitions_deleted. Run by the owner; idemctl purge calls it in its own transaction after the records.';
