-- The state machine lives in the database: a trigger on idem.records refuses every status change
-- outside the contract's table, also for a direct UPDATE, owns the version counter, and writes
-- idem.transitions so that no path can change a status without leaving history.

-- The contract's transition table. system: the protocol functions; operator: idem.settle.
CREATE FUNCTION idem.transition_allowed(from_status text, to_status text, actor_kind text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN from_status IS NULL THEN to_status = 'PROCESSING' AND actor_kind = 'system'
        WHEN actor_kind = 'system' THEN
             (from_status = 'FAILED' AND to_status = 'PROCESSING')
          OR (from_status = 'PROCESSING' AND to_status IN ('SUCCESS', 'FAILED', 'UNKNOWN'))
          OR (from_status = 'UNKNOWN' AND to_status IN ('SUCCESS', 'FAILED'))
        WHEN actor_kind = 'operator' THEN
             from_status IN ('PROCESSING', 'UNKNOWN') AND to_status IN ('SUCCESS', 'FAILED')
        ELSE false
    END
$$;

COMMENT ON FUNCTION idem.transition_allowed(text, text, text) IS
    'The contract''s state machine: may a change from from_status (NULL: creation) to to_status be made by actor_kind?';

-- Every status change: check it against the table, bump the version, write the history.
-- The protocol functions say who is acting and why through transaction-local settings
-- (idem.actor_kind, idem.reason, idem.evidence); the trigger reads them. A direct UPDATE that sets
-- none is recorded as a system change with a reason that says so.
CREATE FUNCTION idem.records_guard() RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_kind     text;
    v_reason   text;
    v_evidence jsonb;
    v_from     text;
BEGIN
    -- UPDATE. Identity columns never change.
    IF NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key
       OR NEW.biz_type IS DISTINCT FROM OLD.biz_type
       OR NEW.biz_id IS DISTINCT FROM OLD.biz_id
       OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'record %: idempotency_key, biz_type, biz_id and created_at never change',
            OLD.idempotency_key
            USING ERRCODE = 'check_violation', CONSTRAINT = 'records_identity_immutable';
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
    NEW.version := OLD.version + 1;
    INSERT INTO idem.transitions (idempotency_key, from_status, to_status, version,
                                  actor_kind, reason, evidence)
    VALUES (NEW.idempotency_key, v_from, NEW.status, NEW.version, v_kind, v_reason, v_evidence);
    RETURN NEW;
END
$$;

CREATE TRIGGER records_guard
    BEFORE UPDATE ON idem.records
    FOR EACH ROW EXECUTE FUNCTION idem.records_guard();

-- Creation is checked and recorded AFTER the insert: a BEFORE trigger would also fire for the rows
-- that INSERT ... ON CONFLICT DO NOTHING then skips, and would write history for them.
CREATE FUNCTION idem.records_created() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF NEW.status <> 'PROCESSING' OR NEW.version <> 1 OR NEW.attempt_count <> 1 THEN
        RAISE EXCEPTION 'record %: a record is created in PROCESSING at version 1, not % at version %',
            NEW.idempotency_key, NEW.status, NEW.version
            USING ERRCODE = 'check_violation', CONSTRAINT = 'records_state_machine',
                  HINT = 'Create records through idem.begin().';
    END IF;
    INSERT INTO idem.transitions (idempotency_key, from_status, to_status, version, actor_kind,
                                  created_at)
    VALUES (NEW.idempotency_key, NULL, 'PROCESSING', 1, 'system', NEW.created_at);
    RETURN NULL;
END
$$;

CREATE TRIGGER records_created
    AFTER INSERT ON idem.records
    FOR EACH ROW EXECUTE FUNCTION idem.records_created();

-- The history and the ledger are append-only: rows are added, or removed by retention, never edited.
CREATE FUNCTION idem.refuse_update() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION '%.% is append-only: rows are never updated', TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'check_violation', CONSTRAINT = TG_TABLE_NAME || '_append_only';
END
$$;

CREATE TRIGGER attempts_append_only BEFORE UPDATE ON idem.attempts
    FOR EACH ROW EXECUTE FUNCTION idem.refuse_update();
CREATE TRIGGER transitions_append_only BEFORE UPDATE ON idem.transitions
    FOR EACH ROW EXECUTE FUNCTION idem.refuse_update();
CREATE TRIGGER fund_flows_append_only BEFORE UPDATE ON idem.fund_flows
    FOR EACH ROW EXECUTE FUNCTION idem.refuse_update();
