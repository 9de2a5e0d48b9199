-- The one decision path of settle and resolve, with the side-effect rule. A decision of FAILED
-- first meets the business object's flows on idem.ledger_objects.

CREATE OR REPLACE FUNCTION idem.decide(
    p_kind text,
    p_key text,
    p_expected_version integer,
    p_to_status text,
    p_reason text,
    p_evidence jsonb,
    p_override_money_moved boolean,
    OUT result text,
    OUT status text,
    OUT version integer)
 RETURNS record
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
DECLARE
    r          idem.records;
    v_position jsonb;
    v_evidence jsonb := p_evidence;
    v_ctx      text;
    v_override text := '';
BEGIN
    SELECT * INTO r FROM idem.records AS x WHERE x.idempotency_key = p_key FOR UPDATE;
    IF NOT FOUND THEN
        result := 'not_found';
        RETURN;
    END IF;
    status := r.status; version := r.version;
    IF r.version IS DISTINCT FROM p_expected_version THEN
        result := 'conflict';
        RETURN;
    END IF;
    IF NOT idem.transition_allowed(r.status, p_to_status, p_kind) THEN
        result := 'invalid_transition';
        RETURN;
    END IF;
    IF r.status = 'PROCESSING' AND r.lease_expires_at >= now() THEN
        result := 'lease_active';
        RETURN;
    END IF;
    IF p_to_status = 'FAILED' THEN
        PERFORM idem.touch_ledger_object(r.biz_type, r.biz_id);
        IF idem.side_effect_recorded(r.biz_type, r.biz_id, r.idempotency_key) THEN
            IF p_kind <> 'operator' OR NOT coalesce(p_override_money_moved, false) THEN
                result := 'side_effect_recorded';
                RETURN;
            END IF;
            -- The override is part of the record's history: who, and the ledger overridden.
            SELECT to_jsonb(s) INTO v_position FROM idem.side_effect_of(p_key) AS s;
            v_evidence := CASE WHEN v_evidence IS NULL THEN '{}'::jsonb
                               WHEN jsonb_typeof(v_evidence) = 'object' THEN v_evidence
                               ELSE jsonb_build_object('evidence', v_evidence) END
                          || jsonb_build_object('override_money_moved',
                                 jsonb_build_object('by', session_user, 'side_effect', v_position));
            v_override := 'on';
        END IF;
    END IF;

    -- Set either way: a value the caller's session set beforehand must not reach the trigger.
    PERFORM set_config('idem.override_money_moved', v_override, true);
    v_ctx := idem.act(p_kind, p_reason, coalesce(v_evidence::text, ''));
    UPDATE idem.records AS x
       SET status = p_to_status,
           response_payload = CASE WHEN p_to_status = 'SUCCESS'
               THEN coalesce(x.response_payload,
                             jsonb_build_object(CASE p_kind WHEN 'operator' THEN 'settled_by'
                                                            ELSE 'resolved_by' END, session_user,
                                                'reason', p_reason, 'evidence', v_evidence))
               ELSE x.response_payload END,
           last_error = CASE WHEN p_to_status = 'FAILED'
               THEN CASE p_kind WHEN 'operator' THEN 'settled' ELSE 'resolved' END
                    || ' FAILED by ' || session_user || ': ' || p_reason
               ELSE x.last_error END,
           -- Declaring FAILED declares that the side effect did not happen: it may run again.
           retry_allowed = (p_to_status = 'FAILED')
     WHERE x.idempotency_key = p_key
    RETURNING 'ok', x.status, x.version INTO result, status, version;
    -- Later statements in this transaction must not inherit this identity.
    v_ctx := idem.act('', '', '');
    PERFORM set_config('idem.override_money_moved', '', true);
END
$function$;

COMMENT ON FUNCTION idem.decide(text, text, integer, text, text, jsonb, boolean) IS
    'Internal: the one decision path of settle (operator) and resolve (reconciler): locks the record, answers not_found, conflict, invalid_transition, lease_active or side_effect_recorded, else changes it.';
