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
BEGIN
    -- purge_records refuses an age that is not positive before it removes anything.
    SELECT p.records_deleted, p.tombstones_written INTO records_deleted, tombstones_written
      FROM idem.purge_records(p_older_than) AS p;
    -- The history goes a day at a time (migration 017): see idem.purge_history. In this one
    -- transaction the history tables stay locked from the drops to the commit, which comes at
    -- once; idemctl purge runs the two parts as transactions of their own.
    SELECT h.attempts_deleted, h.transitions_deleted INTO attempts_deleted, transitions_deleted
      FROM idem.purge_history(p_older_than) AS h;
END
$function$;

COMMENT ON FUNCTION idem.purge(interval) IS
    'Retention (schema contract v2): removes SUCCESS/FAILED records older than the age, each leaving a tombstone in idem.retired_keys (a later begin under the key is retired; a new key for a paid business object is rejected), and the history (attempts, transitions) of keys with no record or a SUCCESS one a whole day partition at a time, once the day is older than the age; never anything of a PROCESSING, UNKNOWN or FAILED record. Returns records_deleted, attempts_deleted, transitions_deleted, tombstones_written.';
