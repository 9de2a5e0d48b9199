-- Why a claimant's answer (complete, fail, mark_unknown) was refused.

CREATE OR REPLACE FUNCTION idem.claimant_refusal(
    p_key text,
    p_expected_version integer,
    p_token uuid,
    OUT result text,
    OUT status text,
    OUT version integer)
 RETURNS record
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT CASE WHEN r.idempotency_key IS NULL THEN 'not_found'
                WHEN p_token IS NULL OR r.claim_token_hash IS DISTINCT FROM idem.token_hash(p_token)
                    THEN 'not_claimant'
                WHEN r.version IS DISTINCT FROM p_expected_version THEN 'conflict'
                ELSE 'invalid_transition' END,
           CASE WHEN p_token IS NOT NULL AND r.claim_token_hash = idem.token_hash(p_token)
                THEN r.status END,
           CASE WHEN p_token IS NOT NULL AND r.claim_token_hash = idem.token_hash(p_token)
                THEN r.version END
    FROM (SELECT 1) AS one
    LEFT JOIN idem.records AS r ON r.idempotency_key = p_key
$function$;

COMMENT ON FUNCTION idem.claimant_refusal(text, integer, uuid) IS
    'Internal: why complete/fail/mark_unknown changed nothing: not_found, not_claimant (status and version NULL), conflict or invalid_transition.';
