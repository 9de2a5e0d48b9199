-- A record that needs a decision by evidence or a person: UNKNOWN, or PROCESSING past its lease.

CREATE OR REPLACE FUNCTION idem.is_stuck(status text, lease_expires_at timestamp with time zone)
 RETURNS boolean
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    SELECT status = 'UNKNOWN' OR idem.lease_expired(status, lease_expires_at)
$function$;

COMMENT ON FUNCTION idem.is_stuck(text, timestamp with time zone) IS
    'A stuck record: UNKNOWN, or PROCESSING past its lease (idem.lease_expired). The admin app''s attention queue, the exporter''s stuck gauge and the simulator''s operator read this. Inlined by the planner.';
