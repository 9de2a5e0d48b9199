CREATE OR REPLACE FUNCTION idem.mark_unknown(
    p_key text,
    p_expected_version integer,
    p_reason text,
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
    v_ctx := idem.act('system', coalesce(p_reason, ''), '');
    UPDATE idem.records AS r
       SET status = 'UNKNOWN', last_error = p_reason
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

COMMENT ON FUNCTION idem.mark_unknown(text, integer, text, uuid) IS
    'The claimant reports that it cannot know the outcome (PROCESSING -> UNKNOWN: a response timeout). Never a failure: evidence or a person decides. result as complete.';
