-- The gateway's status API's answer about one record's call (idemctl reconcile --lookup).

CREATE OR REPLACE FUNCTION idem.record_lookup_answer(
    p_gateway text,
    p_idempotency_key text,
    p_answer_id text,
    p_happened boolean,
    p_kind text,
    p_amount_minor bigint,
    p_currency text,
    p_gateway_ref text,
    p_payload jsonb,
    OUT result text,
    OUT record_key text,
    OUT flow_id bigint,
    OUT record_status text,
    OUT already_received boolean)
 RETURNS record
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT * FROM idem.ingest_gateway_event('lookup', p_gateway, p_answer_id, p_happened, p_kind,
                                            p_amount_minor, p_currency, p_gateway_ref,
                                            p_idempotency_key, NULL, p_payload)
$function$;

COMMENT ON FUNCTION idem.record_lookup_answer(text, text, text, boolean, text, bigint, text, text, jsonb) IS
    'The gateway''s word (idem_ledger): the status API''s answer about one record''s call. happened true (with kind, amount, currency, reference) records the flow and resolves an UNKNOWN record SUCCESS when amount and currency agree; false resolves it FAILED once the call is older than the gateway''s not_found_after (refused while the ledger records its side effect); NULL (the gateway does not know) decides nothing. Stored once per answer id.';
