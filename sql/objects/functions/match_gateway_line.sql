-- Which record a gateway's line or event is, exact references only, in this order: the
-- idempotency key the client put in the gateway's metadata, merchant reference or EndToEndId;
-- the gateway reference of a flow the ledger already has; the business object, among the
-- gateway's business types, when exactly one record has it. Amount and currency must agree with
-- the record's request (its payload's amount_minor and currency, when it carries them) and with a
-- flow of the same reference, or the line is a mismatch: never a match. Nothing fuzzy decides here.
-- The rule is written once, for many lines at a time, in idem.match_gateway_lines: this is it for one.

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
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT m.result, m.record_key, m.biz_type, m.biz_id, m.role, m.detail
      FROM idem.match_gateway_lines(p_gateway, ARRAY[p_kind], ARRAY[p_amount_minor],
                                    ARRAY[p_currency], ARRAY[p_gateway_ref], ARRAY[p_key],
                                    ARRAY[p_biz_id]) AS m
$function$;

COMMENT ON FUNCTION idem.match_gateway_line(text, text, bigint, text, text, text, text) IS
    'Internal: the record a gateway''s line or event is (by idempotency key, else the gateway reference of a recorded flow, else the business object among the gateway''s business types when exactly one record has it), and whether amount, currency and kind agree: result matched, mismatched, unmatched or not_a_flow, with the record, the flow''s role for it and a sentence saying why.';
