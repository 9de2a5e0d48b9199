-- The contract's transition table, as (from, to, actor kind) alone; the conditions that need the
-- row (a lease, retry_allowed, money moved) are checked by idem.records_guard. The system never
-- takes UNKNOWN to FAILED (an uncertain outcome is never a failure); the reconciler decides from
-- evidence, and an operator may correct FAILED -> SUCCESS.

CREATE OR REPLACE FUNCTION idem.transition_allowed(
    from_status text,
    to_status text,
    actor_kind text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT CASE
        WHEN from_status IS NULL THEN to_status = 'PROCESSING' AND actor_kind = 'system'
        WHEN actor_kind = 'system' THEN
             (from_status = 'FAILED' AND to_status = 'PROCESSING')
          OR (from_status = 'PROCESSING' AND to_status IN ('SUCCESS', 'FAILED', 'UNKNOWN'))
          OR (from_status = 'UNKNOWN' AND to_status = 'SUCCESS')
        WHEN actor_kind = 'reconciler' THEN
             from_status IN ('PROCESSING', 'UNKNOWN') AND to_status IN ('SUCCESS', 'FAILED')
        WHEN actor_kind = 'operator' THEN
             (from_status IN ('PROCESSING', 'UNKNOWN') AND to_status IN ('SUCCESS', 'FAILED'))
          OR (from_status = 'FAILED' AND to_status = 'SUCCESS')
        ELSE false
    END
$function$;

COMMENT ON FUNCTION idem.transition_allowed(text, text, text) IS
    'The contract''s state machine (v2): may a change from from_status (NULL: creation) to to_status be made by actor_kind (system, operator, reconciler)? The row''s conditions (a PROCESSING record only past its lease for operator and reconciler, FAILED -> PROCESSING only when retry_allowed and no money moved, FAILED by operator or reconciler only when no money moved) are the trigger''s.';
