-- Which record a gateway's line or event is, exact references only, in this order: the
-- idempotency key the client put in the gateway's metadata, merchant reference or EndToEndId;
-- the gateway reference of a flow the ledger already has; the business object, among the
-- gateway's business types, when exactly one record has it. Amount and currency must agree with
-- the record's request (its payload's amount_minor and currency, when it carries them) and with a
-- flow of the same reference, or the line is a mismatch: never a match. Nothing fuzzy decides here.

CREATE OR REPLACE FUNCTION idem.match_gateway_line(
    p_gateway text,
    p_kind text,
    p_amount_minor bigint,
    p_currency text,
    p_gateway_ref text,
    p_key text,
    p_biz_id text,
    OUT result text,
    OUT record_key text,
    OUT biz_type text,
    OUT biz_id text,
    OUT role text,
    OUT detail text)
 RETURNS record
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    r          record;
    f          record;
    v_by       text;
    v_types    text[];
    v_n        integer;
    v_req_amt  text;
    v_req_cur  text;
BEGIN
    IF p_kind IS NULL THEN
        result := 'not_a_flow';
        detail := 'not a business object''s side effect (a fee, a payout, a transfer)';
        RETURN;
    END IF;
    IF p_key IS NOT NULL THEN
        SELECT x.idempotency_key, x.biz_type, x.biz_id, x.request_payload INTO r
          FROM idem.records AS x WHERE x.idempotency_key = p_key;
        IF FOUND THEN v_by := 'its idempotency key'; END IF;
    END IF;
    IF v_by IS NULL AND p_gateway_ref IS NOT NULL THEN
        SELECT x.idempotency_key, x.biz_type, x.biz_id, x.request_payload INTO r
          FROM idem.fund_flows AS fl
          JOIN idem.records AS x ON x.idempotency_key = fl.idempotency_key
         WHERE fl.external_ref = p_gateway_ref;
        IF FOUND THEN v_by := 'the gateway reference of a recorded flow'; END IF;
    END IF;
    IF v_by IS NULL AND p_biz_id IS NOT NULL THEN
        SELECT g.biz_types INTO v_types FROM idem.gateways AS g WHERE g.gateway = p_gateway;
        SELECT count(*) INTO v_n
          FROM idem.records AS x
         WHERE x.biz_id = p_biz_id AND x.biz_type = ANY (coalesce(v_types, '{}'))
           AND idem.side_effect_role(x.biz_type, p_kind) <> 'none';
        IF v_n > 1 THEN
            result := 'unmatched';
            detail := format('%s records of business object %s could be it: a person decides which',
                             v_n, p_biz_id);
            RETURN;
        END IF;
        SELECT x.idempotency_key, x.biz_type, x.biz_id, x.request_payload INTO r
          FROM idem.records AS x
         WHERE x.biz_id = p_biz_id AND x.biz_type = ANY (coalesce(v_types, '{}'))
           AND idem.side_effect_role(x.biz_type, p_kind) <> 'none';
        IF FOUND THEN v_by := 'its business object'; END IF;
    END IF;
    IF v_by IS NULL THEN
        result := 'unmatched';
        detail := 'no record has its idempotency key, its gateway reference or its business object';
        RETURN;
    END IF;

    record_key := r.idempotency_key; biz_type := r.biz_type; biz_id := r.biz_id;
    role := idem.side_effect_role(r.biz_type, p_kind);
    result := 'mismatched';
    IF role = 'none' THEN
        detail := format('matched by %s, but a %s is neither a %s''s side effect nor its reversal',
                         v_by, p_kind, r.biz_type);
        RETURN;
    END IF;
    v_req_cur := r.request_payload ->> 'currency';
    v_req_amt := r.request_payload ->> 'amount_minor';
    IF v_req_cur IS NOT NULL AND upper(v_req_cur) <> p_currency THEN
        detail := format('matched by %s, but the gateway moved %s %s and the request was in %s',
                         v_by, p_amount_minor, p_currency, upper(v_req_cur));
        RETURN;
    END IF;
    -- A reversal may give back part of the charge: only its currency must agree.
    IF role = 'effect' AND v_req_amt ~ '^[0-9]{1,18}$' AND v_req_amt::bigint <> p_amount_minor THEN
        detail := format('matched by %s, but the gateway moved %s %s and the request asked %s %s',
                         v_by, p_amount_minor, p_currency, v_req_amt, upper(coalesce(v_req_cur, p_currency)));
        RETURN;
    END IF;
    IF p_gateway_ref IS NOT NULL THEN
        SELECT fl.amount_minor, fl.currency, fl.kind, fl.biz_type, fl.biz_id INTO f
          FROM idem.fund_flows AS fl WHERE fl.external_ref = p_gateway_ref;
        IF FOUND AND (f.biz_type <> r.biz_type OR f.biz_id <> r.biz_id) THEN
            detail := format('matched by %s (%s %s), but the ledger records %s for %s %s',
                             v_by, r.biz_type, r.biz_id, p_gateway_ref, f.biz_type, f.biz_id);
            RETURN;
        END IF;
        IF FOUND AND (f.amount_minor <> p_amount_minor OR f.currency <> p_currency OR f.kind <> p_kind) THEN
            detail := format('matched by %s, but the ledger records %s as %s %s %s and the gateway says %s %s %s',
                             v_by, p_gateway_ref, f.kind, f.amount_minor, f.currency,
                             p_kind, p_amount_minor, p_currency);
            RETURN;
        END IF;
    END IF;
    result := 'matched';
    detail := 'matched by ' || v_by;
END
$function$;

COMMENT ON FUNCTION idem.match_gateway_line(text, text, bigint, text, text, text, text) IS
    'Internal: the record a gateway''s line or event is (by idempotency key, else the gateway reference of a recorded flow, else the business object among the gateway''s business types when exactly one record has it), and whether amount, currency and kind agree: result matched, mismatched, unmatched or not_a_flow, with the record, the flow''s role for it and a sentence saying why.';
