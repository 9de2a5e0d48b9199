-- A gateway's webhook, in the same idempotency context as the call it reports.

CREATE OR REPLACE FUNCTION idem.ingest_callback(
    p_gateway text,
    p_event_id text,
    p_kind text,
    p_amount_minor bigint,
    p_currency text,
    p_gateway_ref text,
    p_idempotency_key text,
    p_biz_id text,
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
    SELECT * FROM idem.ingest_gateway_event('callback', p_gateway, p_event_id, true, p_kind,
                                            p_amount_minor, p_currency, p_gateway_ref,
                                            p_idempotency_key, p_biz_id, p_payload)
$function$;

COMMENT ON FUNCTION idem.ingest_callback(text, text, text, bigint, text, text, text, text, jsonb) IS
    'The gateway''s word (idem_ledger): a webhook event reporting a side effect (kind, amount, currency, the gateway''s reference of it, and the idempotency key or business object it names). Once per event id: a re-delivery returns what the first found (already_received). Matched, its flow is recorded under the gateway reference and an UNKNOWN record resolved SUCCESS. result matched, mismatched, unmatched or duplicate.';
