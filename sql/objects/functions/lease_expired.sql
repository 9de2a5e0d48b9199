-- A claimant whose lease has run out: it may have crashed, its answer may never come.

CREATE OR REPLACE FUNCTION idem.lease_expired(
    status text,
    lease_expires_at timestamp with time zone)
 RETURNS boolean
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    SELECT status = 'PROCESSING' AND lease_expires_at < now()
$function$;

COMMENT ON FUNCTION idem.lease_expired(text, timestamp with time zone) IS
    'A PROCESSING record whose lease has ended (by the database''s clock): its claimant may be gone. Inlined by the planner.';
