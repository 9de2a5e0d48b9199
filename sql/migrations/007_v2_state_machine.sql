-- Schema contract version 2 (docs/contract/schema.md, "State machine"), part 2 of 4: the v2
-- transition table, enforced by one trigger on idem.records for every path, direct UPDATEs
-- included.

-- The contract's transition table, as (from, to, actor kind) alone; the conditions that need the
-- row (a lease, retry_allowed, money moved) are checked by idem.records_guard below. The exporter
-- cross-checks its copy of the table against this function.
-- Version 2 removes UNKNOWN -> FAILED by the system (an uncertain outcome is never a failure),
-- adds the reconciler and the operator's FAILED -> SUCCESS correction.
CREATE OR REPLACE FUNCTION idem.transition_allowed(from_status text, to_status text, actor_kind text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN from_status IS NULL THEN to_status = 'PROCESSING' AND actor_kind = 'system'
        WHEN actor_kind = 'system' THEN
             (from_status = 'FAILED' AND to_status = 'PROCESSING')
          OR (from_status = 'PROCESSING' AND to_status IN ('SUCCESS', 'FAILED', 'UNKNOWN'))
          OR (from_status = 'UNKNOWN' AND to_status = 'SUCCESS')
        WHEN actor_kind = 'reconciler' THEN
             from_status IN ('PROCESSING', 'UNKNOWN') AND to_status IN ('SUCCESS', 'FAILED')
        WHEN actor_kind = 'operator' THEN
             (from_status IN ('PROCESSING', 'UNKNOWN') AND to_status IN ('SUCCESS', 'FAILED'))
          OR (from_status = 'FAILED' AND to_status = 'SUCCESS')
        ELSE false
    END
$$;

COMMENT ON FUNCTION idem.transition_allowed(text, text, text) IS
    'The contract''s state machine (v2): may a change from from_status (NULL: creation) to to_status be made by actor_kind (system, operator, reconciler)? The row''s conditions (a PROCESSING record only past its lease for operator and reconciler, FAILED -> PROCESSING only when retry_allowed and no money moved, FAILED by operator or reconciler only when no money moved) are the trigger''s.';

-- One trigger, BEFORE INSERT OR UPDATE, where version 1 had two (a BEFORE UPDATE guard and an
-- AFTER INSERT history writer). The AFTER trigger cost every begin an after-trigger event and a
-- statement of its own; version 2's idem.begin writes the creation's history in the same statement
-- that inserts the record (a data-modifying CTE), and this trigger refuses any INSERT that does not
-- come from idem.begin, so a record still cannot exist without its history.
--
-- Who acts and why come from transaction-local settings set by the protocol functions (idem.act):
-- idem.actor_kind, idem.reason, idem.evidence, and idem.override_money_moved (settle's explicit
-- override). A direct UPDATE that sets none is a system change with a reason that says so, and the
-- system may not do what only evidence or a person may.
CREATE OR REPLACE FUNCTION idem.records_guard() RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_kind     text;
    v_reason   text;
    v_evidence jsonb;
    v_from     text;
    v_moved    boolean;
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

    -- A PROCESSING record always has a lease (version 1's table CHECK records_processing_has_lease,
    -- checked here instead: see the end of this file).
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

    -- The conditions of the v2 table that need the row. The functions check them first to answer
    -- with a result code; these are the guard for every other path.
    IF v_kind IN ('operator', 'reconciler') THEN
        IF v_from = 'PROCESSING' AND OLD.lease_expires_at >= now() THEN
            RAISE EXCEPTION 'record %: PROCESSING until its lease ends at %; its claimant may still answer',
                OLD.idempotency_key, OLD.lease_expires_at
                USING ERRCODE = 'check_violation', CONSTRAINT = 'records_lease_active';
        END IF;
        IF idem.is_blank(v_reason) THEN
            RAISE EXCEPTION 'record %: a % decision needs a reason', OLD.idempotency_key, v_kind
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
    IF (v_from = 'FAILED' AND NEW.status = 'PROCESSING')
       OR (NEW.status = 'FAILED' AND v_kind IN ('operator', 'reconciler')
           AND current_setting('idem.override_money_moved', true) IS DISTINCT FROM 'on') THEN
        SELECT m.money_moved INTO v_moved
          FROM idem.money_position AS m
         WHERE m.biz_type = OLD.biz_type AND m.biz_id = OLD.biz_id;
        IF coalesce(v_moved, false) THEN
            RAISE EXCEPTION 'record %: money moved for % %, so it cannot be % (see idem.money_position)',
                OLD.idempotency_key, OLD.biz_type, OLD.biz_id,
                CASE WHEN NEW.status = 'FAILED' THEN 'declared FAILED' ELSE 'run again' END
                USING ERRCODE = 'check_violation', CONSTRAINT = 'records_money_moved';
        END IF;
    END IF;

    NEW.version := OLD.version + 1;
    INSERT INTO idem.transitions (idempotency_key, from_status, to_status, version,
                                  actor_kind, reason, evidence)
    VALUES (NEW.idempotency_key, v_from, NEW.status, NEW.version, v_kind, v_reason, v_evidence);
    RETURN NEW;
END
$$;

-- The two table CHECK constraints of version 1 on the hot path become the trigger's: PostgreSQL
-- rebuilds a table's CHECK expressions from their stored text for every statement that writes the
-- table (ExecRelCheck), and every begin and complete wrote records once and transitions once each.
-- records_processing_has_lease is checked above for INSERT and UPDATE; the reason of an operator's
-- change (transitions_operator_gives_reason) is checked above, before its history row is written,
-- and more strictly (any whitespace is blank). Only this trigger writes operator history.
ALTER TABLE idem.records DROP CONSTRAINT records_processing_has_lease;
ALTER TABLE idem.transitions DROP CONSTRAINT transitions_operator_gives_reason;

DROP TRIGGER records_guard ON idem.records;
DROP TRIGGER records_created ON idem.records;
DROP FUNCTION idem.records_created();
CREATE TRIGGER records_guard
    BEFORE INSERT OR UPDATE ON idem.records
    FOR EACH ROW EXECUTE FUNCTION idem.records_guard();

COMMENT ON FUNCTION idem.records_guard() IS
    'The records trigger (BEFORE INSERT OR UPDATE, schema contract v2): records are created only by idem.begin, in PROCESSING at version 1 with a lease; every status change is checked against idem.transition_allowed and the row''s conditions (lease, retry_allowed, money moved, a reason, a reconciler''s evidence), gets version + 1 and its row in idem.transitions.';
