CREATE OR REPLACE FUNCTION idem.complete(
    p_key text,
    p_expected_version integer,
    p_response_payload jsonb,
    p_claim_token uuid,
    OUT result text,
    OUT status text,
    OUT version integer)
 RETURNS record
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    v_ctx text;
BEGIN
    v_ctx := idem.act('system', '', '');
    -- One statement, no read before it: the token, the version and the state are its conditions.
    UPDATE idem.records AS r
       SET status = 'SUCCESS', response_payload = p_response_payload
     WHERE r.idempotency_key = p_key AND r.version = p_expected_version
       AND r.status IN ('PROCESSING', 'UNKNOWN')
       AND r.claim_token_hash = idem.token_hash(p_claim_token)
    RETURNING 'ok', r.status, r.version INTO result, status, version;
    IF NOT FOUND THEN
        SELECT * INTO result, status, version
          FROM idem.claimant_refusal(p_key, p_expected_version, p_claim_token);
    END IF;
END
$function$;

COMMENT ON FUNCTION idem.complete(text, integer, jsonb, uuid) IS
    'The claimant reports success (PROCESSING or UNKNOWN -> SUCCESS) with the claim token begin gave it. result ok | conflict | invalid_transition | not_found | not_claimant (status and version NULL, nothing changes).';
