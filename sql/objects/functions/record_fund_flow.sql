-- The gateway's word (callbacks, statements, status lookups): idem_ledger only.
-- The claimant's word: the holder of the key's claim token reports its own side effect.

CREATE OR REPLACE FUNCTION idem.record_fund_flow(
    p_biz_type text,
    p_biz_id text,
    p_kind text,
    p_amount_minor bigint,
    p_currency text,
    p_external_ref text,
    p_idempotency_key text DEFAULT NULL::text,
    OUT flow_id bigint,
    OUT is_duplicate boolean,
    OUT already_recorded boolean)
 RETURNS record
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    PERFORM idem.check_fund_flow(p_biz_type, p_biz_id, p_kind, p_amount_minor, p_currency,
                                 p_external_ref);
    IF p_idempotency_key IS NOT NULL AND char_length(p_idempotency_key) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'idempotency key must be 1 to 255 characters, got %',
            char_length(p_idempotency_key)::text || ' characters'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO flow_id, is_duplicate, already_recorded
      FROM idem.write_fund_flow(p_biz_type, p_biz_id, p_kind, p_amount_minor, p_currency,
                                p_external_ref, p_idempotency_key, 'ledger');
END
$function$;

COMMENT ON FUNCTION idem.record_fund_flow(text, text, text, bigint, text, text, text) IS
    'The gateway''s word (schema contract v3, idem_ledger only): one line of its ledger, from a callback, a statement or a status lookup, recorded_by ledger. Returns flow_id, is_duplicate (a different external_ref for an object and kind that had a flow: the double charge, recorded and flagged) and already_recorded (the same external_ref again: nothing written).';

CREATE OR REPLACE FUNCTION idem.record_fund_flow(
    p_biz_type text,
    p_biz_id text,
    p_kind text,
    p_amount_minor bigint,
    p_currency text,
    p_external_ref text,
    p_idempotency_key text,
    p_claim_token uuid,
    OUT flow_id bigint,
    OUT is_duplicate boolean,
    OUT already_recorded boolean)
 RETURNS record
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    r       record;
    v_kinds text[];
BEGIN
    PERFORM idem.check_fund_flow(p_biz_type, p_biz_id, p_kind, p_amount_minor, p_currency,
                                 p_external_ref);
    -- The record is held (KEY SHARE) until the flow commits: a settle or resolve of it waits and
    -- then sees the flow; complete, fail and mark_unknown do not wait.
    SELECT x.biz_type, x.biz_id, x.claim_token_hash INTO r
      FROM idem.records AS x WHERE x.idempotency_key = p_idempotency_key FOR KEY SHARE;
    IF NOT FOUND OR p_claim_token IS NULL
       OR r.claim_token_hash IS DISTINCT FROM idem.token_hash(p_claim_token) THEN
        RAISE EXCEPTION 'only the claimant of key % records a flow under it: % claim token',
            coalesce(quote_literal(left(p_idempotency_key, 255)), 'NULL'),
            CASE WHEN p_claim_token IS NULL THEN 'no' ELSE 'a wrong' END
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Pass the claim token begin returned with executed; the gateway''s own records come through a login granted idem_ledger.';
    END IF;
    IF r.biz_type <> p_biz_type OR r.biz_id <> p_biz_id THEN
        RAISE EXCEPTION 'key % claims % %, not % %: a claimant records flows of its own business object only',
            quote_literal(p_idempotency_key), r.biz_type, r.biz_id, p_biz_type, p_biz_id
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_kinds := (idem.business_type(p_biz_type)).effect_kinds;
    IF NOT (p_kind = ANY (v_kinds) OR p_kind IN ('FREEZE', 'UNFREEZE')) THEN
        RAISE EXCEPTION 'a % claimant reports its own side effect (%) or a hold, not %',
            p_biz_type,
            CASE WHEN cardinality(v_kinds) = 0 THEN 'none in the ledger'
                 ELSE array_to_string(v_kinds, ' or ') END,
            p_kind
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Other flows of the object are the gateway''s word: record them through idem_ledger.';
    END IF;
    SELECT * INTO flow_id, is_duplicate, already_recorded
      FROM idem.write_fund_flow(p_biz_type, p_biz_id, p_kind, p_amount_minor, p_currency,
                                p_external_ref, p_idempotency_key, 'claimant');
END
$function$;

COMMENT ON FUNCTION idem.record_fund_flow(text, text, text, bigint, text, text, text, uuid) IS
    'The claimant''s word (schema contract v3, idem_writer): the holder of the key''s claim token reports its own side effect (a flow of one of its business type''s effect kinds, or a hold) for its own business object, recorded_by claimant. A wrong or missing token is refused (42501), nothing is written. Returns as the gateway''s form.';
