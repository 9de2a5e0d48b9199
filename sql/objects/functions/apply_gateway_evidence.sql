-- What a matched line or event does: its flow enters the ledger as the gateway's word (once: its
-- gateway reference is the flow's external_ref, so a callback and the statement line of the same
-- charge are one flow), and when it is the record's side effect and the record is UNKNOWN, or
-- PROCESSING past its lease, the record is resolved SUCCESS with the line as evidence. A second
-- side effect for a business object that had one is recorded and flagged: money moved twice.

CREATE OR REPLACE FUNCTION idem.apply_gateway_evidence(
    p_record_key text,
    p_biz_type text,
    p_biz_id text,
    p_role text,
    p_kind text,
    p_amount_minor bigint,
    p_currency text,
    p_gateway_ref text,
    p_reason text,
    p_evidence jsonb,
    OUT result text,
    OUT flow_id bigint,
    OUT decided text)
 RETURNS record
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_dup   boolean;
    v_again boolean;
    r       record;
    d       record;
BEGIN
    SELECT w.flow_id, w.is_duplicate, w.already_recorded INTO flow_id, v_dup, v_again
      FROM idem.write_fund_flow(p_biz_type, p_biz_id, p_kind, p_amount_minor, p_currency,
                                p_gateway_ref,
                                CASE WHEN p_role = 'effect' THEN p_record_key END, 'ledger') AS w;
    -- A flow already under this reference is the same side effect only if it is the same thing:
    -- the same business object, kind, amount and currency. Anything else is a person's question.
    IF v_again AND NOT EXISTS (
           SELECT FROM idem.fund_flows AS f
            WHERE f.id = flow_id AND f.biz_type = p_biz_type AND f.biz_id = p_biz_id
              AND f.kind = p_kind AND f.amount_minor = p_amount_minor
              AND f.currency = p_currency) THEN
        result := 'mismatched';
        flow_id := NULL;
        RETURN;
    END IF;
    result := CASE WHEN v_dup THEN 'duplicate' ELSE 'matched' END;
    IF p_role <> 'effect' OR v_dup THEN
        RETURN;
    END IF;
    SELECT x.status, x.version, x.lease_expires_at INTO r
      FROM idem.records AS x WHERE x.idempotency_key = p_record_key;
    IF r.status = 'UNKNOWN' OR (r.status = 'PROCESSING' AND r.lease_expires_at < now()) THEN
        SELECT * INTO d
          FROM idem.decide('reconciler', p_record_key, r.version, 'SUCCESS', p_reason,
                           p_evidence || jsonb_build_object('flow_id', flow_id), false);
        IF d.result = 'ok' THEN decided := 'SUCCESS'; END IF;
    END IF;
END
$function$;

COMMENT ON FUNCTION idem.apply_gateway_evidence(text, text, text, text, text, bigint, text, text, text, jsonb) IS
    'Internal: records a matched line''s or event''s flow as the gateway''s word (recorded_by ledger) and, when it is the record''s side effect and the record is UNKNOWN or PROCESSING past its lease, resolves it SUCCESS (actor kind reconciler) with the evidence. result matched or duplicate; decided SUCCESS when it decided.';
