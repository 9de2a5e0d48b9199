-- The records trigger: every change of a record passes the state machine (transition_allowed)
-- and the side-effect rule, and writes its transition.

CREATE OR REPLACE FUNCTION idem.records_guard()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_kind     text;
    v_reason   text;
    v_evidence jsonb;
    v_from     text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        -- A BEFORE INSERT trigger also fires for the rows INSERT ... ON CONFLICT DO NOTHING then
        -- skips: it only checks, it writes nothing.
        IF NEW.status <> 'PROCESSING' OR NEW.version <> 1 OR NEW.attempt_count <> 1
           OR NEW.lease_expires_at IS NULL THEN
            RAISE EXCEPTION 'record %: a record is created in PROCESSING at version 1, not % at version %',
                NEW.idempotency_key, NEW.status, NEW.version
                USING ERRCODE = 'check_violation', CONSTRAINT = 'records_state_machine',
                      HINT = 'Create records through idem.begin().';
        END IF;
        IF current_setting('idem.creating', true) IS DISTINCT FROM NEW.idempotency_key THEN
            RAISE EXCEPTION 'record %: records are created only by idem.begin(), which writes their history',
                NEW.idempotency_key
                USING ERRCODE = 'check_violation', CONSTRAINT = 'records_state_machine',
                      HINT = 'Create records through idem.begin().';
        END IF;
        RETURN NEW;
    END IF;

    -- UPDATE. Identity columns never change.
    IF NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key
       OR NEW.biz_type IS DISTINCT FROM OLD.biz_type
       OR NEW.biz_id IS DISTINCT FROM OLD.biz_id
       OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'record %: idempotency_key, biz_type, biz_id and created_at never change',
            OLD.idempotency_key
            USING ERRCODE = 'check_violation', CONSTRAINT = 'records_identity_immutable';
    END IF;

    IF NEW.status = 'PROCESSING' AND NEW.lease_expires_at IS NULL THEN
        RAISE EXCEPTION 'record %: a PROCESSING record needs a lease', OLD.idempotency_key
            USING ERRCODE = 'check_violation', CONSTRAINT = 'records_processing_has_lease';
    END IF;

    NEW.updated_at := now();
    IF NEW.status IS NOT DISTINCT FROM OLD.status THEN
        -- No status change: the version belongs to status changes only.
        NEW.version := OLD.version;
        RETURN NEW;
    END IF;

    v_from := OLD.status;
    v_kind := nullif(current_setting('idem.actor_kind', true), '');
    v_reason := nullif(current_setting('idem.reason', true), '');
    v_evidence := nullif(current_setting('idem.evidence', true), '')::jsonb;
    IF v_kind IS NULL THEN
        v_kind := 'system';
        v_reason := coalesce(v_reason, 'direct UPDATE outside the protocol functions');
    END IF;
    IF NOT idem.transition_allowed(v_from, NEW.status, v_kind) THEN
        RAISE EXCEPTION 'record %: % -> % is not a transition the state machine allows (actor kind %)',
            OLD.idempotency_key, v_from, NEW.status, v_kind
            USING ERRCODE = 'check_violation', CONSTRAINT = 'records_state_machine',
                  HINT = 'SUCCESS is final; see the transition table in the schema contract.';
    END IF;

    -- The conditions of the transition table that need the row. The functions check them first to
    -- answer with a result code; these are the guard for every other path.
    IF v_kind IN ('operator', 'reconciler') THEN
        IF v_from = 'PROCESSING' AND OLD.lease_expires_at >= now() THEN
            RAISE EXCEPTION 'record %: PROCESSING until its lease ends at %; its claimant may still answer',
                OLD.idempotency_key, OLD.lease_expires_at
                USING ERRCODE = 'check_violation', CONSTRAINT = 'records_lease_active';
        END IF;
        IF NOT idem.has_visible_text(v_reason) THEN
            RAISE EXCEPTION 'record %: a % decision needs a reason with a visible letter or digit',
                OLD.idempotency_key, v_kind
                USING ERRCODE = 'check_violation', CONSTRAINT = 'records_decision_has_reason';
        END IF;
        IF v_kind = 'reconciler'
           AND (v_evidence IS NULL OR jsonb_typeof(v_evidence) <> 'object' OR v_evidence = '{}') THEN
            RAISE EXCEPTION 'record %: a reconciler decision needs evidence (a non-empty JSON object)',
                OLD.idempotency_key
                USING ERRCODE = 'check_violation', CONSTRAINT = 'records_decision_has_evidence';
        END IF;
    END IF;
    IF v_from = 'FAILED' AND NEW.status = 'PROCESSING' AND NOT OLD.retry_allowed THEN
        RAISE EXCEPTION 'record %: the failure is final (retry_allowed is false); it is never run again',
            OLD.idempotency_key
            USING ERRCODE = 'check_violation', CONSTRAINT = 'records_failure_final';
    END IF;
    -- Whatever the path: a FAILED record whose side effect the ledger records is never claimed
    -- again, and nobody but a person with an explicit override declares such a record FAILED.
    IF ((v_from = 'FAILED' AND NEW.status = 'PROCESSING')
        OR (NEW.status = 'FAILED' AND v_kind IN ('operator', 'reconciler')
            AND NOT (v_kind = 'operator'
                     AND current_setting('idem.override_money_moved', true)
                         IS NOT DISTINCT FROM 'on')))
       AND idem.side_effect_recorded(OLD.biz_type, OLD.biz_id, OLD.idempotency_key) THEN
        RAISE EXCEPTION 'record %: the ledger records the side effect of % % (see idem.side_effect_of), so it cannot be %',
            OLD.idempotency_key, OLD.biz_type, OLD.biz_id,
            CASE WHEN NEW.status = 'FAILED' THEN 'declared FAILED' ELSE 'run again' END
            USING ERRCODE = 'check_violation', CONSTRAINT = 'records_side_effect_recorded';
    END IF;

    NEW.version := OLD.version + 1;
    INSERT INTO idem.transitions (idempotency_key, from_status, to_status, version,
                                  actor_kind, reason, evidence)
    VALUES (NEW.idempotency_key, v_from, NEW.status, NEW.version, v_kind, v_reason, v_evidence);
    RETURN NEW;
END
$function$;

COMMENT ON FUNCTION idem.records_guard() IS
    'The records trigger (BEFORE INSERT OR UPDATE, schema contract v3): records are created only by idem.begin, in PROCESSING at version 1 with a lease; every status change is checked against idem.transition_allowed and the row''s conditions (lease, retry_allowed, the side effect recorded, a reason, a reconciler''s evidence), gets version + 1 and its row in idem.transitions.';
