-- A gateway's callback, or its status API's answer, in the same idempotency context as the
-- call it reports: stored once per event id (a re-delivered callback is a no-op that returns what
-- the first delivery found), matched exactly like a statement line, and when matched its flow
-- enters the ledger under the gateway's reference (the same flow as the statement line of that
-- side effect, never a second one) and an UNKNOWN record is resolved. A status answer that the
-- side effect did not happen resolves FAILED; an answer that does not know decides nothing.

CREATE OR REPLACE FUNCTION idem.ingest_gateway_event(
    p_source text,
    p_gateway text,
    p_event_id text,
    p_happened boolean,
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
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    e       idem.gateway_events;
    m       record;
    a       record;
    d       record;
    r       record;
    v_id    bigint;
    v_ref   text;
    v_evid  jsonb;
    v_detail text;
    v_not_found_after interval;
    v_since timestamptz;
BEGIN
    IF p_gateway IS NULL OR char_length(p_gateway) NOT BETWEEN 1 AND 64
       OR p_gateway ~ '[^A-Za-z0-9_.-]' THEN
        RAISE EXCEPTION 'gateway must be 1 to 64 characters of A-Z a-z 0-9 _ . -, got %',
            coalesce(quote_literal(left(p_gateway, 80)), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT idem.has_visible_text(p_event_id) OR char_length(p_event_id) > 255 THEN
        RAISE EXCEPTION 'a gateway event needs its id (1 to 255 characters): a re-delivery is known by it'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_happened AND (p_kind IS NULL OR p_amount_minor IS NULL OR p_currency IS NULL) THEN
        RAISE EXCEPTION 'a % that reports a side effect names its kind, amount and currency', p_source
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_happened THEN
        PERFORM idem.check_fund_flow('gateway', coalesce(p_biz_id, 'unknown'), p_kind,
                                     p_amount_minor, upper(p_currency), coalesce(p_gateway_ref, p_gateway || ':' || p_event_id));
    END IF;
    IF p_idempotency_key IS NULL AND p_gateway_ref IS NULL AND p_biz_id IS NULL THEN
        RAISE EXCEPTION 'a % names the call it reports: an idempotency key, a gateway reference or a business object', p_source
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    INSERT INTO idem.gateways (gateway) VALUES (p_gateway) ON CONFLICT DO NOTHING;
    INSERT INTO idem.gateway_events AS x (gateway, source, event_id, gateway_ref, flow_kind,
                                          amount_minor, currency, idempotency_key, biz_id, payload,
                                          result)
    VALUES (p_gateway, p_source, p_event_id, p_gateway_ref, CASE WHEN p_happened THEN p_kind END,
            p_amount_minor, upper(p_currency), p_idempotency_key, p_biz_id,
            coalesce(p_payload, '{}'::jsonb), 'unmatched')
    ON CONFLICT (gateway, source, event_id) DO NOTHING
    RETURNING x.id INTO v_id;
    IF NOT FOUND THEN
        SELECT * INTO e FROM idem.gateway_events AS x
         WHERE x.gateway = p_gateway AND x.source = p_source AND x.event_id = p_event_id;
        result := e.result; record_key := e.record_key; flow_id := e.flow_id;
        already_received := true;
        SELECT x.status INTO record_status FROM idem.records AS x WHERE x.idempotency_key = e.record_key;
        RETURN;
    END IF;
    already_received := false;
    v_evid := jsonb_build_object('source', p_source, 'gateway', p_gateway, 'event_id', p_event_id,
                                 'gateway_ref', p_gateway_ref, 'happened', p_happened,
                                 'payload', coalesce(p_payload, '{}'::jsonb));

    IF p_happened IS NULL THEN
        result := 'pending';
        v_detail := 'the gateway does not know yet: decides nothing';
        SELECT x.idempotency_key INTO record_key FROM idem.records AS x
         WHERE x.idempotency_key = p_idempotency_key;
    ELSIF NOT p_happened THEN
        -- The gateway says it did not happen: FAILED, through the same side-effect rule as any
        -- decision (a flow of the object in the ledger refuses it), and only when this gateway
        -- carries the record's business type and nothing the gateway said before contradicts it:
        -- no line or event naming the record or its business object that reported money moving
        -- (whatever matching found) or pending.
        SELECT x.idempotency_key, x.biz_type, x.biz_id, x.status, x.version, x.lease_expires_at,
               x.updated_at
          INTO r
          FROM idem.records AS x WHERE x.idempotency_key = p_idempotency_key;
        IF NOT FOUND THEN
            result := 'unmatched';
            v_detail := 'no record has its idempotency key';
        ELSE
            record_key := r.idempotency_key;
            SELECT g.not_found_after INTO v_not_found_after
              FROM idem.gateways AS g WHERE g.gateway = p_gateway;
            v_not_found_after := coalesce(v_not_found_after, interval '10 minutes');
            v_since := CASE WHEN r.status = 'PROCESSING'
                            THEN greatest(r.updated_at, r.lease_expires_at)
                            ELSE r.updated_at END;
            result := 'not_a_flow';
            v_detail := 'the gateway says it did not happen';
            IF r.biz_type <> ALL (coalesce((SELECT g.biz_types FROM idem.gateways AS g
                                             WHERE g.gateway = p_gateway), '{}')) THEN
                v_detail := v_detail || format('; not resolved: %s is not declared to carry %s '
                                               '(idemctl declare-gateway --biz-types)',
                                               p_gateway, r.biz_type);
            ELSIF p_source = 'lookup' AND v_since > now() - v_not_found_after THEN
                -- A status API may not know yet of a call it received a moment ago: its "no such
                -- payment" counts only once the call is old enough: the record's last change (an
                -- UNKNOWN mark comes after the call), or for a claim past its lease the lease's end
                -- (the call may have gone out until then).
                v_detail := v_detail || format('; not resolved: %s''s "did not happen" counts %s after the call (the record''s last change, or its lease''s end), and that was %s ago: ask again later (idemctl declare-gateway --not-found-after)',
                                               p_gateway, v_not_found_after,
                                               date_trunc('second', now() - v_since));
            ELSIF EXISTS (SELECT FROM idem.statement_lines AS l
                           WHERE l.flow_kind IS NOT NULL
                             AND (l.idempotency_key = r.idempotency_key
                                  OR l.record_key = r.idempotency_key OR l.biz_id = r.biz_id))
               OR EXISTS (SELECT FROM idem.gateway_events AS e
                           WHERE e.id <> v_id AND e.flow_kind IS NOT NULL
                             AND (e.idempotency_key = r.idempotency_key
                                  OR e.record_key = r.idempotency_key OR e.biz_id = r.biz_id)) THEN
                v_detail := v_detail || '; not resolved: a statement line or a callback reported '
                                        'money moving for it: a person decides';
            ELSIF r.status = 'UNKNOWN' OR (r.status = 'PROCESSING' AND r.lease_expires_at < now()) THEN
                SELECT * INTO d
                  FROM idem.decide('reconciler', r.idempotency_key, r.version, 'FAILED',
                                   format('%s: %s says %s did not happen', p_source, p_gateway,
                                          coalesce(p_gateway_ref, p_idempotency_key)),
                                   v_evid, false);
                v_detail := v_detail || CASE d.result WHEN 'ok' THEN '; resolved the record FAILED'
                                                      ELSE '; not resolved: ' || d.result END;
            END IF;
        END IF;
    ELSE
        SELECT * INTO m
          FROM idem.match_gateway_line(p_gateway, p_kind, p_amount_minor, upper(p_currency),
                                       p_gateway_ref, p_idempotency_key, p_biz_id);
        result := m.result; record_key := m.record_key; v_detail := m.detail;
        IF m.result = 'matched' THEN
            v_ref := coalesce(p_gateway_ref, p_gateway || ':' || p_event_id);
            SELECT * INTO a
              FROM idem.apply_gateway_evidence(
                       m.record_key, m.biz_type, m.biz_id, m.role, p_kind, p_amount_minor,
                       upper(p_currency), v_ref,
                       format('%s: %s %s shows the %s (%s %s %s)', p_source, p_gateway, v_ref,
                              m.biz_type, p_kind, p_amount_minor, upper(p_currency)),
                       v_evid || jsonb_build_object('matched', m.detail));
            result := a.result; flow_id := a.flow_id;
            IF a.decided IS NOT NULL THEN
                v_detail := v_detail || '; resolved the record ' || a.decided;
            END IF;
        END IF;
    END IF;
    UPDATE idem.gateway_events AS x
       SET result = ingest_gateway_event.result, record_key = ingest_gateway_event.record_key,
           flow_id = ingest_gateway_event.flow_id, detail = v_detail
     WHERE x.id = v_id;
    SELECT x.status INTO record_status FROM idem.records AS x WHERE x.idempotency_key = record_key;
END
$function$;

COMMENT ON FUNCTION idem.ingest_gateway_event(text, text, text, boolean, text, bigint, text, text, text, text, jsonb) IS
    'Internal: one callback event or status answer, stored once per (gateway, source, event id), matched (idem.match_gateway_line) and applied: happened true records the flow and resolves SUCCESS, false resolves FAILED (the side-effect rule still holds), NULL decides nothing.';
