CREATE OR REPLACE FUNCTION idem.fail(
    p_key text,
    p_expected_version integer,
    p_error text,
    p_claim_token uuid,
    p_retry_allowed boolean DEFAULT false,
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
    v_ctx := idem.act('system', coalesce(p_error, ''), '');
    UPDATE idem.records AS r
       SET status = 'FAILED', last_error = p_error,
           retry_allowed = coalesce(p_retry_allowed, false)
     WHERE r.idempotency_key = p_key AND r.version = p_expected_version
       AND r.status = 'PROCESSING'
       AND r.claim_token_hash = idem.token_hash(p_claim_token)
    RETURNING 'ok', r.status, r.version INTO result, status, version;
    IF NOT FOUND THEN
        SELECT * INTO result, status, version
          FROM idem.claimant_refusal(p_key, p_expected_version, p_claim_token);
    END IF;
END
$function$;

COMMENT ON FUNCTION idem.fail(text, integer, text, uuid, boolean) IS
    'The claimant reports a definite failure (PROCESSING -> FAILED; an UNKNOWN record is decided only by resolve or settle). retry_allowed false (the default): final, a retry with the same request is replayed status FAILED with response_payload {"error": error}; the error is kept in records.last_error. true: the request certainly never reached downstream, the same request may be claimed again unless money moved. result as complete.';
