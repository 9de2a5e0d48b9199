-- Schema contract version 3 (docs/contract/schema.md): the one rule for every business type's side
-- effect, not only a charge; a ledger that only the claimant of a key and the gateway's side may
-- write; the protocol's answers at every isolation level.
--
--   * Each business type declares which fund flow kinds prove that its side effect happened
--     (idem.business_types: payment DEBIT or CAPTURE, refund REFUND, payout CREDIT, coupon none).
--     A flow of one of those kinds under the record's own key, or for its business object beyond
--     what the type's reversals gave back, is "the side effect happened"
--     (idem.side_effect_recorded): FAILED is refused with `side_effect_recorded`, a FAILED record
--     is not claimed again, and idem.reconcile() settles SUCCESS from it. version 2 knew only
--     charges: a refund whose REFUND was in the ledger read as "nothing moved".
--   * record_fund_flow with a claim token is the claimant reporting its own side effect (idem_writer);
--     without one it is the gateway's word (idem_ledger, a new role). Every flow says which of the
--     two recorded it (recorded_by); flows from before this rule are `legacy`. A writer can no
--     longer forge the evidence that reconcile and the guards trust.
--   * Decisions that rest on the absence of a flow (FAILED by settle or resolve, a FAILED record
--     claimed again) and every flow meet on one row per business object (idem.ledger_objects), so
--     at REPEATABLE READ and SERIALIZABLE a flow committed after the decision's snapshot makes the
--     decision fail with a serialization failure instead of being missed; idem.begin at those levels
--     recognises a record that retention removed after its snapshot and answers retired or rejected.
--
-- Signatures and grants of version 2 stay, except record_fund_flow's: the seven-argument form now
-- belongs to idem_ledger, and idem_writer gets the eight-argument form with the claim token.

-- The third kind of flow writer: flows loaded before this rule keep their meaning.
ALTER TABLE idem.fund_flows
    ADD COLUMN recorded_by text NOT NULL DEFAULT 'legacy',
    ADD COLUMN recorded_login text;
-- NOT VALID: every existing row holds the default, which the check admits; nothing to scan.
ALTER TABLE idem.fund_flows
    ADD CONSTRAINT fund_flows_recorded_by_valid
    CHECK (recorded_by IN ('claimant', 'ledger', 'legacy')) NOT VALID;
-- From now on every writer names itself (only the protocol functions insert).
ALTER TABLE idem.fund_flows ALTER COLUMN recorded_by DROP DEFAULT;
-- An amount a currency can hold: the bound idem.record_fund_flow checks, kept by the table for
-- every other path; a legacy line beyond it stays (NOT VALID), and the money questions total it.
ALTER TABLE idem.fund_flows
    ADD CONSTRAINT fund_flows_amount_bounded CHECK (amount_minor <= 999999999999999) NOT VALID;

COMMENT ON COLUMN idem.fund_flows.recorded_by IS
    'Who recorded the flow: claimant (the holder of the key''s claim token, reporting its own side effect), ledger (the gateway''s side: callbacks, statements, lookups, through idem_ledger), legacy (recorded before schema contract v3).';
COMMENT ON COLUMN idem.fund_flows.recorded_login IS
    'The login that recorded the flow (session_user); NULL for legacy flows.';

-- What each business type's side effect is, as the ledger can prove it. Extended by the schema's
-- owner (a member of idem_owner) with idem.declare_business_type; read by everyone.
CREATE TABLE idem.business_types (
    biz_type       text        NOT NULL,
    effect_kinds   text[]      NOT NULL,
    reversal_kinds text[]      NOT NULL DEFAULT '{}',
    description    text        NOT NULL,
    declared_by    text        NOT NULL DEFAULT session_user,
    declared_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT business_types_pkey PRIMARY KEY (biz_type),
    CONSTRAINT business_types_name_valid
        CHECK (char_length(biz_type) BETWEEN 1 AND 64 AND biz_type !~ '[^A-Za-z0-9_.-]'),
    -- Holds (FREEZE, UNFREEZE) never prove that anything happened. NULL elements fail <@.
    CONSTRAINT business_types_effect_kinds_valid
        CHECK (effect_kinds <@ ARRAY['DEBIT', 'CREDIT', 'REFUND', 'CAPTURE']),
    CONSTRAINT business_types_reversal_kinds_valid
        CHECK (reversal_kinds <@ ARRAY['DEBIT', 'CREDIT', 'REFUND', 'CAPTURE']),
    CONSTRAINT business_types_kinds_apart CHECK (NOT (effect_kinds && reversal_kinds)),
    CONSTRAINT business_types_reversal_needs_effect
        CHECK (cardinality(reversal_kinds) = 0 OR cardinality(effect_kinds) > 0)
);

COMMENT ON TABLE idem.business_types IS
    'What proves each business type''s side effect happened: effect_kinds (fund flow kinds), netted within one currency against reversal_kinds for the business object. Empty effect_kinds: the ledger cannot tell (a person decides). A biz_type not listed here is read cautiously: any DEBIT, CREDIT, REFUND or CAPTURE proves its side effect, nothing reverses it.';

INSERT INTO idem.business_types (biz_type, effect_kinds, reversal_kinds, description) VALUES
    ('payment', ARRAY['DEBIT', 'CAPTURE'], ARRAY['REFUND'],
     'a charge to the customer: a DEBIT or CAPTURE proves it, REFUNDs give it back'),
    ('refund', ARRAY['REFUND'], '{}', 'money returned to the customer: a REFUND proves it'),
    ('payout', ARRAY['CREDIT'], '{}', 'money paid out to the customer: a CREDIT proves it'),
    ('coupon', '{}', '{}',
     'a coupon issued: it leaves no line in the ledger, so the ledger cannot tell whether it happened');

-- One row per business object that a flow or a decision resting on the ledger has touched: the
-- place where they meet. Every flow updates its object's row (trigger fund_flows_touch_object);
-- settle and resolve to FAILED, and begin claiming a FAILED record again, update it before they
-- read the ledger. At READ COMMITTED they take turns on its row lock; at REPEATABLE READ and
-- SERIALIZABLE a decision whose snapshot predates a flow's change of the row fails with a
-- serialization failure (40001) rather than decide on a ledger that has moved on.
CREATE TABLE idem.ledger_objects (
    biz_type      text        NOT NULL,
    biz_id        text        NOT NULL,
    touched_at    timestamptz NOT NULL,
    CONSTRAINT ledger_objects_pkey PRIMARY KEY (biz_type, biz_id)
);

COMMENT ON TABLE idem.ledger_objects IS
    'Internal: one row per business object touched by a fund flow or by a decision that rests on the ledger (FAILED, or a FAILED record claimed again); they serialise on it, at every isolation level.';

CREATE FUNCTION idem.touch_ledger_object(p_biz_type text, p_biz_id text) RETURNS void
LANGUAGE sql VOLATILE
AS $$
    INSERT INTO idem.ledger_objects AS o (biz_type, biz_id, touched_at)
    VALUES (p_biz_type, p_biz_id, pg_catalog.clock_timestamp())
    ON CONFLICT (biz_type, biz_id) DO UPDATE SET touched_at = EXCLUDED.touched_at
$$;

CREATE FUNCTION idem.flow_touches_object() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM idem.touch_ledger_object(NEW.biz_type, NEW.biz_id);
    RETURN NULL;
END
$$;

CREATE TRIGGER fund_flows_touch_object
    AFTER INSERT ON idem.fund_flows
    FOR EACH ROW EXECUTE FUNCTION idem.flow_touches_object();

-- A business type's declaration, or the cautious reading of an undeclared one.
CREATE FUNCTION idem.business_type(p_biz_type text,
                                   OUT declared boolean, OUT effect_kinds text[],
                                   OUT reversal_kinds text[], OUT description text)
LANGUAGE sql STABLE
AS $$
    SELECT t.biz_type IS NOT NULL,
           coalesce(t.effect_kinds, ARRAY['DEBIT', 'CREDIT', 'REFUND', 'CAPTURE']),
           coalesce(t.reversal_kinds, '{}'::text[]),
           coalesce(t.description,
                    'not declared: any DEBIT, CREDIT, REFUND or CAPTURE proves its side effect')
      FROM (SELECT 1) AS one
      LEFT JOIN idem.business_types AS t ON t.biz_type = p_biz_type
$$;

COMMENT ON FUNCTION idem.business_type(text) IS
    'The declaration of a business type (idem.business_types), or for an undeclared one the cautious reading: any DEBIT, CREDIT, REFUND or CAPTURE proves its side effect, nothing reverses it.';

-- The ledger's word on each business object, per its type's declaration: its side effect is
-- recorded when a flow of an effect kind exists and the reversals have not given it all back
-- (within one currency; effect and reversal flows in several currencies count as recorded).
CREATE VIEW idem.side_effect_position AS
SELECT f.biz_type,
       f.biz_id,
       d.declared,
       d.effect_kinds,
       d.reversal_kinds,
       count(*) FILTER (WHERE f.kind = ANY (d.effect_kinds)) AS effect_flows,
       coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = ANY (d.effect_kinds)), 0) AS effect_minor,
       count(*) FILTER (WHERE f.kind = ANY (d.reversal_kinds)) AS reversal_flows,
       coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = ANY (d.reversal_kinds)), 0) AS reversed_minor,
       (count(*) FILTER (WHERE f.kind = ANY (d.effect_kinds)) > 0
        AND (count(*) FILTER (WHERE f.kind = ANY (d.reversal_kinds)) = 0
             OR count(DISTINCT f.currency)
                  FILTER (WHERE f.kind = ANY (d.effect_kinds || d.reversal_kinds)) > 1
             OR coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = ANY (d.effect_kinds)), 0)
                > coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = ANY (d.reversal_kinds)), 0)))
           AS side_effect_recorded,
       max(f.id) AS last_flow_id
  FROM idem.fund_flows AS f
 CROSS JOIN LATERAL idem.business_type(f.biz_type) AS d
 GROUP BY f.biz_type, f.biz_id, d.declared, d.effect_kinds, d.reversal_kinds;

COMMENT ON VIEW idem.side_effect_position IS
    'Per business object with flows: does the ledger record its type''s side effect (idem.business_types)? effect flows exist and the reversals have not given it all back, within one currency. No row: no flows. For one record, idem.side_effect_recorded also counts effect flows under its own key.';

-- The one definition every guard reads: the side effect of the record (biz_type, biz_id, key)
-- happened, as far as the ledger knows: an effect flow under its own key, or its business object's
-- position.
CREATE FUNCTION idem.side_effect_recorded(p_biz_type text, p_biz_id text, p_key text)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT EXISTS (SELECT 1 FROM idem.fund_flows AS f
                    WHERE f.biz_type = p_biz_type AND f.biz_id = p_biz_id
                      AND f.idempotency_key = p_key
                      AND f.kind = ANY ((idem.business_type(p_biz_type)).effect_kinds))
        OR coalesce((SELECT p.side_effect_recorded FROM idem.side_effect_position AS p
                      WHERE p.biz_type = p_biz_type AND p.biz_id = p_biz_id), false)
$$;

COMMENT ON FUNCTION idem.side_effect_recorded(text, text, text) IS
    'Does the ledger record the side effect of the record (biz_type, biz_id, key)? A flow of one of its type''s effect kinds under its own key, or idem.side_effect_position for its business object. FAILED is refused and a FAILED record is not claimed again when it does.';

-- What the settle path, the admin app and idemctl show an operator about one record's side effect.
CREATE FUNCTION idem.side_effect_of(p_key text)
RETURNS TABLE (biz_type text, biz_id text, declared boolean, effect_kinds text[],
               reversal_kinds text[], description text, ledger_can_tell boolean,
               under_own_key boolean, for_business_object boolean, side_effect_recorded boolean)
LANGUAGE sql STABLE
AS $$
    SELECT r.biz_type::text, r.biz_id::text, d.declared, d.effect_kinds, d.reversal_kinds,
           d.description, cardinality(d.effect_kinds) > 0, k.under_key,
           coalesce(p.side_effect_recorded, false),
           k.under_key OR coalesce(p.side_effect_recorded, false)
      FROM idem.records AS r
     CROSS JOIN LATERAL idem.business_type(r.biz_type) AS d
     CROSS JOIN LATERAL (SELECT EXISTS (SELECT 1 FROM idem.fund_flows AS f
                                         WHERE f.biz_type = r.biz_type AND f.biz_id = r.biz_id
                                           AND f.idempotency_key = r.idempotency_key
                                           AND f.kind = ANY (d.effect_kinds)) AS under_key) AS k
      LEFT JOIN idem.side_effect_position AS p ON p.biz_type = r.biz_type AND p.biz_id = r.biz_id
     WHERE r.idempotency_key = p_key
$$;

COMMENT ON FUNCTION idem.side_effect_of(text) IS
    'One record''s side effect as the ledger knows it: its type''s declaration, whether the ledger can tell at all (ledger_can_tell false: FAILED is a person''s word), and whether an effect flow is under its own key or its business object''s position records it. No row: no such key.';

-- The owner declares what its business types' side effects are.
CREATE FUNCTION idem.declare_business_type(p_biz_type text, p_effect_kinds text[],
                                           p_reversal_kinds text[], p_description text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_biz_type IS NULL OR char_length(p_biz_type) NOT BETWEEN 1 AND 64
       OR p_biz_type ~ '[^A-Za-z0-9_.-]' THEN
        RAISE EXCEPTION 'biz_type must be 1 to 64 characters of A-Z a-z 0-9 _ . -, got %',
            coalesce(quote_literal(left(p_biz_type, 80)), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_effect_kinds IS NULL OR NOT (p_effect_kinds <@ ARRAY['DEBIT', 'CREDIT', 'REFUND', 'CAPTURE']) THEN
        RAISE EXCEPTION 'effect kinds must be among DEBIT, CREDIT, REFUND, CAPTURE (holds prove nothing), got %',
            coalesce(p_effect_kinds::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_reversal_kinds IS NULL OR NOT (p_reversal_kinds <@ ARRAY['DEBIT', 'CREDIT', 'REFUND', 'CAPTURE']) THEN
        RAISE EXCEPTION 'reversal kinds must be among DEBIT, CREDIT, REFUND, CAPTURE, got %',
            coalesce(p_reversal_kinds::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_effect_kinds && p_reversal_kinds THEN
        RAISE EXCEPTION 'a kind cannot both prove and reverse the side effect: % and %',
            p_effect_kinds, p_reversal_kinds USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(p_reversal_kinds) > 0 AND cardinality(p_effect_kinds) = 0 THEN
        RAISE EXCEPTION 'reversal kinds need effect kinds to reverse'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF idem.is_blank(p_description) THEN
        RAISE EXCEPTION 'a business type needs a description: what its side effect is'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO idem.business_types AS t (biz_type, effect_kinds, reversal_kinds, description)
    VALUES (p_biz_type, p_effect_kinds, p_reversal_kinds, p_description)
    ON CONFLICT (biz_type) DO UPDATE
       SET effect_kinds = EXCLUDED.effect_kinds, reversal_kinds = EXCLUDED.reversal_kinds,
           description = EXCLUDED.description, declared_by = session_user, declared_at = now();
END
$$;

COMMENT ON FUNCTION idem.declare_business_type(text, text[], text[], text) IS
    'Declares (or redeclares) what proves a business type''s side effect: effect kinds, reversal kinds, a description. Run by the schema''s owner; takes effect for every guard at once.';

-- A reason a person can read: at least one letter or digit of a script people write (Latin, Greek,
-- Cyrillic, Armenian, Hebrew, Arabic, the Indic and Thai scripts, Georgian, Hangul, Kana, CJK
-- ideographs, full-width Latin), whatever the database's locale. Invisible characters that look
-- like text to a blank check (U+2800 braille blank, U+3164 and U+115F/U+1160 Hangul fillers,
-- U+200E marks, U+00AD soft hyphen, U+2061 invisible operators) are not among them.
CREATE FUNCTION idem.has_visible_text(p_text text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(p_text ~ '[0-9A-Za-z\u00AA\u00B5\u00BA\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u02AF\u0370-\u03FF\u0400-\u052F\u0531-\u0556\u0561-\u0587\u05D0-\u05EA\u0620-\u064A\u0660-\u0669\u06F0-\u06F9\u0904-\u0939\u0966-\u096F\u0985-\u09B9\u0E01-\u0E30\u0E50-\u0E59\u10A0-\u10FF\u1100-\u115E\u1161-\u11FF\u1E00-\u1FFF\u3041-\u3096\u30A1-\u30FA\u3400-\u4DBF\u4E00-\u9FFF\uAC00-\uD7A3\uF900-\uFAFF\uFF10-\uFF19\uFF21-\uFF3A\uFF41-\uFF5A\U00020000-\U0002FA1F]', false)
$$;

COMMENT ON FUNCTION idem.has_visible_text(text) IS
    'Holds at least one letter or digit of a written script (not only spaces, marks, fillers or invisible characters): what a decision''s reason needs.';

-- The bounds of a decision (settle, resolve), checked before anything changes; 22023 naming the
-- field and the limit. A reason must say something a person can read.
CREATE OR REPLACE FUNCTION idem.check_decision(p_what text, p_to_status text, p_reason text,
                                               p_evidence jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_to_status IS NULL OR p_to_status NOT IN ('SUCCESS', 'FAILED') THEN
        RAISE EXCEPTION '% moves a record to SUCCESS or FAILED, not %', p_what,
            coalesce(quote_literal(p_to_status), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT idem.has_visible_text(p_reason) THEN
        RAISE EXCEPTION '% needs a reason with at least one visible letter or digit: say what evidence the decision rests on',
            p_what USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF char_length(p_reason) > 2000 THEN
        RAISE EXCEPTION '% reason must be at most 2000 characters, got %', p_what, char_length(p_reason)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_evidence IS NOT NULL AND octet_length(p_evidence::text) > 65536 THEN
        RAISE EXCEPTION '% evidence must be at most 64 KiB (65536 bytes of JSON text), got % bytes',
            p_what, octet_length(p_evidence::text)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- The records trigger: the money rule of version 2 becomes the side-effect rule.
CREATE OR REPLACE FUNCTION idem.records_guard() RETURNS trigger
LANGUAGE plpgsql
AS $$
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
$$;

COMMENT ON FUNCTION idem.records_guard() IS
    'The records trigger (BEFORE INSERT OR UPDATE, schema contract v3): records are created only by idem.begin, in PROCESSING at version 1 with a lease; every status change is checked against idem.transition_allowed and the row''s conditions (lease, retry_allowed, the side effect recorded, a reason, a reconciler''s evidence), gets version + 1 and its row in idem.transitions.';

-- The one decision path of settle and resolve, with the side-effect rule. A decision of FAILED
-- first meets the business object's flows on idem.ledger_objects.
CREATE OR REPLACE FUNCTION idem.decide(p_kind text, p_key text, p_expected_version integer,
                                       p_to_status text, p_reason text, p_evidence jsonb,
                                       p_override_money_moved boolean,
                                       OUT result text, OUT status text, OUT version integer)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
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
$$;

COMMENT ON FUNCTION idem.decide(text, text, integer, text, text, jsonb, boolean) IS
    'Internal: the one decision path of settle (operator) and resolve (reconciler): locks the record, answers not_found, conflict, invalid_transition, lease_active or side_effect_recorded, else changes it.';

COMMENT ON FUNCTION idem.settle(text, integer, text, text, jsonb, boolean) IS
    'The operator''s decision (schema contract v3): UNKNOWN or PROCESSING past its lease -> SUCCESS or FAILED, or FAILED -> SUCCESS (a correction: the side effect happened after all). Reason required (not blank, at most 2000 characters), evidence at most 64 KiB. result ok | conflict | invalid_transition | not_found | lease_active (PROCESSING, lease live: the claimant may still answer) | side_effect_recorded (FAILED refused: the ledger records the record''s side effect, see idem.side_effect_of) unless override_money_moved, which the transition''s evidence then records under "override_money_moved". Settling FAILED sets retry_allowed.';

COMMENT ON FUNCTION idem.resolve(text, integer, text, text, jsonb) IS
    'The reconciler''s decision from evidence (schema contract v3): UNKNOWN or PROCESSING past its lease -> SUCCESS or FAILED; evidence a required non-empty JSON object (at most 64 KiB), reason required (at most 2000 characters). result ok | conflict | invalid_transition | not_found | lease_active | side_effect_recorded (FAILED refused, no override). Resolving FAILED sets retry_allowed. Actor kind reconciler.';

-- Evidence the machine can read: a flow of one of the record's type's effect kinds under its own
-- key (and business object). Records being changed right now are skipped (SKIP LOCKED): a
-- concurrent complete, settle or reconcile is deciding them, and the row lock plus the version
-- condition below leave exactly one winner.
CREATE OR REPLACE FUNCTION idem.reconcile() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c       record;
    v_count integer := 0;
    v_ctx   text;
    v_n     integer;
    v_why   text;
BEGIN
    FOR c IN
        SELECT r.idempotency_key, r.version, r.biz_type, ev.flows
          FROM idem.records AS r
         CROSS JOIN LATERAL idem.business_type(r.biz_type) AS d
         CROSS JOIN LATERAL (
               SELECT jsonb_agg(jsonb_build_object('id', f.id, 'external_ref', f.external_ref,
                                                   'kind', f.kind, 'amount_minor', f.amount_minor,
                                                   'currency', f.currency,
                                                   'recorded_by', f.recorded_by) ORDER BY f.id) AS flows
                 FROM idem.fund_flows AS f
                WHERE f.biz_type = r.biz_type AND f.biz_id = r.biz_id
                  AND f.idempotency_key = r.idempotency_key
                  AND f.kind = ANY (d.effect_kinds)) AS ev
         WHERE (r.status = 'UNKNOWN' OR (r.status = 'PROCESSING' AND r.lease_expires_at < now()))
           AND ev.flows IS NOT NULL
         ORDER BY r.idempotency_key
           FOR UPDATE OF r SKIP LOCKED
    LOOP
        v_why := 'reconcile: the ledger records the ' || c.biz_type
                 || ' side effect under the record''s own key';
        v_ctx := idem.act('reconciler', v_why, jsonb_build_object('flows', c.flows)::text);
        UPDATE idem.records AS r
           SET status = 'SUCCESS',
               response_payload = coalesce(r.response_payload,
                   jsonb_build_object('resolved_by', session_user, 'reason', v_why,
                                      'evidence', jsonb_build_object('flows', c.flows)))
         WHERE r.idempotency_key = c.idempotency_key AND r.version = c.version
           AND (r.status = 'UNKNOWN' OR (r.status = 'PROCESSING' AND r.lease_expires_at < now()));
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_count := v_count + v_n;
    END LOOP;
    v_ctx := idem.act('', '', '');
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION idem.reconcile() IS
    'Resolves to SUCCESS (actor kind reconciler) every UNKNOWN record and every PROCESSING record past its lease that has a flow of one of its business type''s effect kinds (idem.business_types) naming its own idempotency_key and business object, recorded by the claimant or the gateway''s side; the evidence lists those flows. Returns how many. Never decides FAILED: the absence of a flow is not evidence. Safe to run concurrently (SKIP LOCKED) and against complete (one winner).';

-- The checks every flow passes, whoever records it (22023 naming the field).
CREATE FUNCTION idem.check_fund_flow(p_biz_type text, p_biz_id text, p_kind text,
                                     p_amount_minor bigint, p_currency text, p_external_ref text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_kind IS NULL OR p_kind NOT IN ('DEBIT', 'CREDIT', 'REFUND', 'FREEZE', 'UNFREEZE', 'CAPTURE') THEN
        RAISE EXCEPTION 'unknown fund flow kind %: expected DEBIT, CREDIT, REFUND, FREEZE, UNFREEZE or CAPTURE',
            coalesce(quote_literal(left(p_kind, 40)), 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_currency IS NULL OR p_currency !~ '^[A-Z]{3}$' THEN
        RAISE EXCEPTION 'currency must be three capital letters (ISO 4217), got %',
            coalesce(quote_literal(left(p_currency, 40)), 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_amount_minor IS NULL OR p_amount_minor < 0 OR p_amount_minor > 999999999999999 THEN
        RAISE EXCEPTION 'amount_minor must be 0 to 999999999999999 minor units (ten trillion in a two-decimal currency), got %',
            coalesce(p_amount_minor::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_biz_type IS NULL OR char_length(p_biz_type) NOT BETWEEN 1 AND 64 OR p_biz_type ~ '[^A-Za-z0-9_.-]' THEN
        RAISE EXCEPTION 'biz_type must be 1 to 64 characters of A-Z a-z 0-9 _ . -, got %',
            CASE WHEN p_biz_type IS NULL THEN 'NULL'
                 WHEN char_length(p_biz_type) > 64 THEN char_length(p_biz_type)::text || ' characters'
                 ELSE quote_literal(p_biz_type) END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF idem.is_blank(p_biz_id) OR char_length(p_biz_id) > 255 THEN
        RAISE EXCEPTION 'biz_id must be 1 to 255 characters and not blank, got %',
            coalesce(char_length(p_biz_id)::text || ' characters', 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF idem.is_blank(p_external_ref) OR char_length(p_external_ref) > 255 THEN
        RAISE EXCEPTION 'external_ref must be 1 to 255 characters and not blank, got %',
            coalesce(char_length(p_external_ref)::text || ' characters', 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

COMMENT ON FUNCTION idem.check_fund_flow(text, text, text, bigint, text, text) IS
    'Internal: the bounds of a fund flow, whoever records it (22023 naming the field).';

-- Writes one flow, after the checks: the same external_ref twice returns the first row and writes
-- nothing; a different external_ref for a business object and kind that has a flow is recorded as
-- a duplicate of the first. Not granted to anyone: the two record_fund_flow forms call it.
-- A line already recorded is found by a read before any insert, so a repeated or refused call
-- takes no id from the sequence: an id taken without a row is a gap the exporter must track, and a
-- writer repeating a line must not be able to flood it. Only two callers racing on one new line or
-- one new first flow still take an id each, once.
CREATE FUNCTION idem.write_fund_flow(p_biz_type text, p_biz_id text, p_kind text,
                                     p_amount_minor bigint, p_currency text, p_external_ref text,
                                     p_idempotency_key text, p_recorded_by text,
                                     OUT flow_id bigint, OUT is_duplicate boolean,
                                     OUT already_recorded boolean)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_first bigint;
BEGIN
    FOR round IN 1..5 LOOP
        SELECT f.id, f.duplicate_of IS NOT NULL INTO flow_id, is_duplicate
          FROM idem.fund_flows AS f WHERE f.external_ref = p_external_ref;
        IF FOUND THEN
            already_recorded := true;
            RETURN;
        END IF;
        SELECT f.id INTO v_first
          FROM idem.fund_flows AS f
         WHERE f.biz_type = p_biz_type AND f.biz_id = p_biz_id AND f.kind = p_kind
           AND f.duplicate_of IS NULL;
        -- The first flow of this business object and kind, or a duplicate of the first: the
        -- partial unique index (and the external_ref one) arbitrate between concurrent inserts.
        INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, external_ref,
                                     idempotency_key, duplicate_of, recorded_by, recorded_login)
        VALUES (p_biz_type, p_biz_id, p_kind, p_amount_minor, p_currency, p_external_ref,
                p_idempotency_key, v_first, p_recorded_by, session_user)
        ON CONFLICT DO NOTHING
        RETURNING id INTO flow_id;
        IF FOUND THEN
            is_duplicate := v_first IS NOT NULL; already_recorded := false;
            RETURN;
        END IF;
        -- The same external_ref, or a first flow, arrived concurrently: look again.
    END LOOP;
    RAISE EXCEPTION 'idem.record_fund_flow(%): the ledger kept changing under concurrent callers; retry',
        p_external_ref USING ERRCODE = 'serialization_failure';
END
$$;

COMMENT ON FUNCTION idem.write_fund_flow(text, text, text, bigint, text, text, text, text) IS
    'Internal: writes one checked flow for record_fund_flow (either form), with who recorded it.';

-- The gateway's word (callbacks, statements, status lookups): idem_ledger only.
CREATE OR REPLACE FUNCTION idem.record_fund_flow(
    p_biz_type text, p_biz_id text, p_kind text, p_amount_minor bigint, p_currency text,
    p_external_ref text, p_idempotency_key text DEFAULT NULL,
    OUT flow_id bigint, OUT is_duplicate boolean, OUT already_recorded boolean)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM idem.check_fund_flow(p_biz_type, p_biz_id, p_kind, p_amount_minor, p_currency,
                                 p_external_ref);
    IF p_idempotency_key IS NOT NULL AND char_length(p_idempotency_key) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'idempotency key must be 1 to 255 characters, got %',
            char_length(p_idempotency_key)::text || ' characters'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO flow_id, is_duplicate, already_recorded
      FROM idem.write_fund_flow(p_biz_type, p_biz_id, p_kind, p_amount_minor, p_currency,
                                p_external_ref, p_idempotency_key, 'ledger');
END
$$;

COMMENT ON FUNCTION idem.record_fund_flow(text, text, text, bigint, text, text, text) IS
    'The gateway''s word (schema contract v3, idem_ledger only): one line of its ledger, from a callback, a statement or a status lookup, recorded_by ledger. Returns flow_id, is_duplicate (a different external_ref for an object and kind that had a flow: the double charge, recorded and flagged) and already_recorded (the same external_ref again: nothing written).';

-- The claimant's word: the holder of the key's claim token reports its own side effect.
CREATE FUNCTION idem.record_fund_flow(
    p_biz_type text, p_biz_id text, p_kind text, p_amount_minor bigint, p_currency text,
    p_external_ref text, p_idempotency_key text, p_claim_token uuid,
    OUT flow_id bigint, OUT is_duplicate boolean, OUT already_recorded boolean)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r       record;
    v_kinds text[];
BEGIN
    PERFORM idem.check_fund_flow(p_biz_type, p_biz_id, p_kind, p_amount_minor, p_currency,
                                 p_external_ref);
    -- The record is held (KEY SHARE) until the flow commits: a settle or resolve of it waits and
    -- then sees the flow; complete, fail and mark_unknown do not wait.
    SELECT x.biz_type, x.biz_id, x.claim_token_hash INTO r
      FROM idem.records AS x WHERE x.idempotency_key = p_idempotency_key FOR KEY SHARE;
    IF NOT FOUND OR p_claim_token IS NULL
       OR r.claim_token_hash IS DISTINCT FROM idem.token_hash(p_claim_token) THEN
        RAISE EXCEPTION 'only the claimant of key % records a flow under it: % claim token',
            coalesce(quote_literal(left(p_idempotency_key, 255)), 'NULL'),
            CASE WHEN p_claim_token IS NULL THEN 'no' ELSE 'a wrong' END
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Pass the claim token begin returned with executed; the gateway''s own records come through a login granted idem_ledger.';
    END IF;
    IF r.biz_type <> p_biz_type OR r.biz_id <> p_biz_id THEN
        RAISE EXCEPTION 'key % claims % %, not % %: a claimant records flows of its own business object only',
            quote_literal(p_idempotency_key), r.biz_type, r.biz_id, p_biz_type, p_biz_id
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_kinds := (idem.business_type(p_biz_type)).effect_kinds;
    IF NOT (p_kind = ANY (v_kinds) OR p_kind IN ('FREEZE', 'UNFREEZE')) THEN
        RAISE EXCEPTION 'a % claimant reports its own side effect (%) or a hold, not %',
            p_biz_type,
            CASE WHEN cardinality(v_kinds) = 0 THEN 'none in the ledger'
                 ELSE array_to_string(v_kinds, ' or ') END,
            p_kind
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Other flows of the object are the gateway''s word: record them through idem_ledger.';
    END IF;
    SELECT * INTO flow_id, is_duplicate, already_recorded
      FROM idem.write_fund_flow(p_biz_type, p_biz_id, p_kind, p_amount_minor, p_currency,
                                p_external_ref, p_idempotency_key, 'claimant');
END
$$;

COMMENT ON FUNCTION idem.record_fund_flow(text, text, text, bigint, text, text, text, uuid) IS
    'The claimant''s word (schema contract v3, idem_writer): the holder of the key''s claim token reports its own side effect (a flow of one of its business type''s effect kinds, or a hold) for its own business object, recorded_by claimant. A wrong or missing token is refused (42501), nothing is written. Returns as the gateway''s form.';

-- begin with the side-effect rule, and the same answers at REPEATABLE READ and SERIALIZABLE.
CREATE OR REPLACE FUNCTION idem.begin(
    p_key             text,
    p_biz_type        text,
    p_biz_id          text,
    p_tool            text,
    p_request_hash    text,
    p_trigger_source  text,
    p_request_payload jsonb,
    p_lease           interval DEFAULT '30 seconds',
    p_agent_id        text DEFAULT NULL,
    p_trace_id        text DEFAULT NULL,
    OUT outcome text, OUT status text, OUT version integer, OUT response_payload jsonb,
    OUT claim_token uuid)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_hash       text;
    v_token      uuid;
    v_token_hash bytea;
    v_attempt    bigint;
    v_status     text;
    v_version    integer;
    v_rhash      text;
    v_rtype      text;
    v_rid        text;
    v_resp       jsonb;
    v_error      text;
    v_retry      boolean;
    v_retired    text;
    v_paid       boolean;
    v_moved      boolean;
    v_ctx        text;
    v_fast       boolean;
    v_snapshot   boolean;
    v_lease_end  timestamptz;
BEGIN
    IF p_key IS NULL OR char_length(p_key) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'idempotency key must be 1 to 255 characters, got %',
            coalesce(char_length(p_key)::text || ' characters', 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_trigger_source IS NULL
       OR p_trigger_source NOT IN ('initial', 'llm', 'framework', 'http', 'callback') THEN
        RAISE EXCEPTION 'unknown trigger_source %: expected initial, llm, framework, http or callback',
            coalesce(quote_literal(left(p_trigger_source, 40)), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- biz_type becomes a metric label: a short name, no spaces or punctuation beyond _ . -
    -- (A length test and a negated class rather than '^[...]{1,64}$': PostgreSQL's regex engine
    -- expands a bounded repetition, which cost 8 µs per call against 1 µs.)
    IF p_biz_type IS NULL OR char_length(p_biz_type) NOT BETWEEN 1 AND 64 OR p_biz_type ~ '[^A-Za-z0-9_.-]' THEN
        RAISE EXCEPTION 'biz_type must be 1 to 64 characters of A-Z a-z 0-9 _ . -, got %',
            CASE WHEN p_biz_type IS NULL THEN 'NULL'
                 WHEN char_length(p_biz_type) > 64 THEN char_length(p_biz_type)::text || ' characters'
                 ELSE quote_literal(p_biz_type) END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF idem.is_blank(p_biz_id) OR char_length(p_biz_id) > 255 THEN
        RAISE EXCEPTION 'biz_id must be 1 to 255 characters and not blank, got %',
            coalesce(char_length(p_biz_id)::text || ' characters', 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF idem.is_blank(p_tool) OR char_length(p_tool) > 128 THEN
        RAISE EXCEPTION 'tool must be 1 to 128 characters and not blank, got %',
            coalesce(char_length(p_tool)::text || ' characters', 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_lease IS NULL OR p_lease <= interval '0' OR p_lease > interval '24 hours' THEN
        RAISE EXCEPTION 'lease must be a positive interval of at most 24 hours, got %',
            coalesce(p_lease::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Each is stored and indexed (a B-tree entry is at most about 2.7 kB): bounded with a clear
    -- error, never an index's internal one.
    IF char_length(p_request_hash) > 255 OR char_length(p_agent_id) > 255
       OR char_length(p_trace_id) > 255 THEN
        RAISE EXCEPTION '% must be at most 255 characters, got %',
            CASE WHEN char_length(p_request_hash) > 255 THEN 'request_hash'
                 WHEN char_length(p_agent_id) > 255 THEN 'agent_id' ELSE 'trace_id' END,
            greatest(char_length(p_request_hash), char_length(p_agent_id), char_length(p_trace_id))
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_hash := coalesce(p_request_hash,
                       encode(sha256(convert_to(p_request_payload::text, 'UTF8')), 'hex'));
    IF v_hash IS NULL THEN
        RAISE EXCEPTION 'request_hash and request_payload are both NULL: one is needed to recognise a retry'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The lease runs from this call, not from its transaction's start: a claim made late in a long
    -- transaction still gets the whole lease.
    v_lease_end := clock_timestamp() + p_lease;
    v_token := gen_random_uuid();
    v_token_hash := idem.token_hash(v_token);
    -- The trigger admits an INSERT only under this mark (idem.records_guard). An assignment,
    -- which PL/pgSQL evaluates as a simple expression; PERFORM would run a query.
    v_ctx := set_config('idem.creating', p_key, true);
    -- At REPEATABLE READ and SERIALIZABLE every statement of this call sees the transaction's
    -- snapshot, taken before it started: a purge that committed since is invisible to it, though
    -- the unique indexes already let an insert through in place of the rows it removed. Such a
    -- call takes the checked path, which recognises those rows (below).
    v_snapshot := current_setting('transaction_isolation') <> 'read committed';
    -- Retention (idem.purge) holds this advisory lock exclusively while it removes records and
    -- writes their tombstones. Holding it shared, this call knows that no purge commits between its
    -- statements: a purge has either committed before (its tombstones are in every snapshot taken
    -- from here on) or starts after this transaction. Then a new key's insert can check the
    -- tombstones in its own statement. When a purge runs or waits, the lock is refused at once
    -- and the insert is checked by a statement of its own, after it (below).
    v_fast := NOT v_snapshot AND pg_try_advisory_xact_lock_shared(7347261900532);

    -- A few rounds at most: a round only repeats when the row we conflicted with vanished (retention)
    -- or was re-claimed by a concurrent caller between our statements.
    FOR round IN 1..5 LOOP
        -- The unique indexes decide: the key's primary key and the one-live-record-per-business-
        -- object index. Whoever inserts first owns the record; everyone else waits for that
        -- transaction and then finds the row. The common case, a new key, is one statement that
        -- also writes the creation's history and the attempt, and, on the fast path, checks that
        -- no tombstone names the key or a paid record of the business object and that the object
        -- has no fund flows yet. When one of those holds, nothing is inserted and the next round
        -- takes the checked path, which answers retired or rejected or runs the side-effect rule.
        IF v_fast AND round = 1 THEN
            WITH claimed AS (
                INSERT INTO idem.records (idempotency_key, biz_type, biz_id, tool, request_hash,
                                          status, lease_expires_at, request_payload,
                                          claim_token_hash)
                SELECT p_key, p_biz_type, p_biz_id, p_tool, v_hash, 'PROCESSING', v_lease_end,
                       p_request_payload, v_token_hash
                 WHERE NOT EXISTS (SELECT 1 FROM idem.retired_keys AS t
                                    WHERE t.idempotency_key = p_key)
                   AND NOT EXISTS (SELECT 1 FROM idem.retired_keys AS t
                                    WHERE t.biz_type = p_biz_type AND t.biz_id = p_biz_id
                                      AND t.status = 'SUCCESS')
                   AND NOT EXISTS (SELECT 1 FROM idem.fund_flows AS f
                                    WHERE f.biz_type = p_biz_type AND f.biz_id = p_biz_id)
                ON CONFLICT DO NOTHING
                RETURNING created_at),
            history AS (
                INSERT INTO idem.transitions (idempotency_key, from_status, to_status, version,
                                              actor_kind, created_at)
                SELECT p_key, NULL, 'PROCESSING', 1, 'system', c.created_at FROM claimed AS c)
            INSERT INTO idem.attempts (idempotency_key, biz_type, biz_id, tool, trigger_source,
                                       outcome, request_hash, agent_id, trace_id)
            SELECT p_key, p_biz_type, p_biz_id, p_tool, p_trigger_source, 'executed', v_hash,
                   p_agent_id, p_trace_id
              FROM claimed;
            IF FOUND THEN
                outcome := 'executed'; status := 'PROCESSING'; version := 1;
                claim_token := v_token;
                RETURN;
            END IF;
        ELSE
            WITH claimed AS (
                INSERT INTO idem.records (idempotency_key, biz_type, biz_id, tool, request_hash, status,
                                          lease_expires_at, request_payload, claim_token_hash)
                VALUES (p_key, p_biz_type, p_biz_id, p_tool, v_hash, 'PROCESSING', v_lease_end,
                        p_request_payload, v_token_hash)
                ON CONFLICT DO NOTHING
                RETURNING created_at),
            history AS (
                INSERT INTO idem.transitions (idempotency_key, from_status, to_status, version,
                                              actor_kind, created_at)
                SELECT p_key, NULL, 'PROCESSING', 1, 'system', c.created_at FROM claimed AS c)
            INSERT INTO idem.attempts (idempotency_key, biz_type, biz_id, tool, trigger_source,
                                       outcome, request_hash, agent_id, trace_id)
            SELECT p_key, p_biz_type, p_biz_id, p_tool, p_trigger_source, 'executed', v_hash,
                   p_agent_id, p_trace_id
              FROM claimed
            RETURNING id INTO v_attempt;
            IF FOUND THEN
                -- A new record. Retention may have removed this key, or the business object's paid
                -- record, before: their tombstones say so. Checked in a statement of its own, after
                -- the insert, so that at READ COMMITTED its snapshot includes a purge that
                -- committed while the insert waited on the row it deleted.
                SELECT (SELECT t.status FROM idem.retired_keys AS t WHERE t.idempotency_key = p_key),
                       EXISTS (SELECT 1 FROM idem.retired_keys AS t
                                WHERE t.biz_type = p_biz_type AND t.biz_id = p_biz_id
                                  AND t.status = 'SUCCESS'),
                       EXISTS (SELECT 1 FROM idem.fund_flows AS f
                                WHERE f.biz_type = p_biz_type AND f.biz_id = p_biz_id)
                  INTO v_retired, v_paid, v_moved;
                IF v_snapshot AND v_retired IS NULL AND NOT v_paid THEN
                    -- The transaction's snapshot predates this statement. A row it still shows
                    -- under this key, or a live one of this business object under another key,
                    -- did not stop the insert: a transaction the snapshot cannot see removed it,
                    -- and only retention removes records, leaving the tombstone this snapshot
                    -- misses. The snapshot's row says what the tombstone says.
                    SELECT x.status INTO v_retired
                      FROM idem.records AS x
                     WHERE x.idempotency_key = p_key
                       AND x.claim_token_hash IS DISTINCT FROM v_token_hash;
                    v_paid := EXISTS (SELECT 1 FROM idem.records AS x
                                       WHERE x.biz_type = p_biz_type AND x.biz_id = p_biz_id
                                         AND x.idempotency_key <> p_key
                                         AND x.status = 'SUCCESS');
                END IF;
                -- A new business object has no flows yet: only when it has some is the
                -- side-effect rule (an aggregate) asked.
                IF v_moved THEN
                    v_moved := idem.side_effect_recorded(p_biz_type, p_biz_id, p_key);
                END IF;
                IF v_retired IS NULL AND NOT v_paid AND NOT v_moved THEN
                    outcome := 'executed'; status := 'PROCESSING'; version := 1;
                    claim_token := v_token;
                    RETURN;
                END IF;
                -- Not to be run: take back what this call wrote (nothing of it was ever visible).
                DELETE FROM idem.attempts AS a WHERE a.id = v_attempt;
                DELETE FROM idem.transitions AS t
                 WHERE t.id = (SELECT max(x.id) FROM idem.transitions AS x
                                WHERE x.idempotency_key = p_key);
                DELETE FROM idem.records AS r
                 WHERE r.idempotency_key = p_key AND r.claim_token_hash = v_token_hash;
                IF v_retired IS NOT NULL THEN
                    outcome := 'retired'; status := v_retired;
                ELSE
                    -- Paid before retention removed its record, or its side effect is in the
                    -- ledger under a key whose record failed: another execution would repeat it.
                    outcome := 'rejected'; status := NULL;
                END IF;
                version := NULL;
                EXIT;
            END IF;
        END IF;

        SELECT r.status, r.version, r.request_hash, r.biz_type, r.biz_id, r.response_payload,
               r.last_error, r.retry_allowed
          INTO v_status, v_version, v_rhash, v_rtype, v_rid, v_resp, v_error, v_retry
          FROM idem.records AS r WHERE r.idempotency_key = p_key;
        IF FOUND THEN
            status := v_status; version := v_version;
            IF v_rhash <> v_hash OR v_rtype <> p_biz_type OR v_rid <> p_biz_id THEN
                outcome := 'payload_mismatch';
            ELSIF v_status = 'SUCCESS' THEN
                outcome := 'replayed'; response_payload := v_resp;
            ELSIF v_status IN ('PROCESSING', 'UNKNOWN') THEN
                outcome := 'in_progress';
            ELSIF NOT v_retry THEN
                -- A final failure: handed back, never run again. The error is the record's
                -- last_error, returned as {"error": ...}.
                outcome := 'replayed';
                response_payload := jsonb_build_object('error', v_error);
            ELSE
                -- The ledger's word first: the flows of the object meet this claim on its row of
                -- idem.ledger_objects, so none can slip in unseen (at REPEATABLE READ or
                -- SERIALIZABLE, one committed after this snapshot fails the call with 40001).
                PERFORM idem.touch_ledger_object(p_biz_type, p_biz_id);
                IF idem.side_effect_recorded(p_biz_type, p_biz_id, p_key) THEN
                    outcome := 'rejected';
                    EXIT;
                END IF;
                -- A failure that certainly did not reach downstream: the same request may run
                -- again, under a new token.
                v_ctx := idem.act('system', 'retried after FAILED (' || p_trigger_source || ')', '');
                BEGIN
                    UPDATE idem.records AS r
                       SET status = 'PROCESSING', lease_expires_at = v_lease_end,
                           response_payload = NULL, attempt_count = r.attempt_count + 1,
                           request_payload = coalesce(p_request_payload, r.request_payload),
                           claim_token_hash = v_token_hash, retry_allowed = false
                     WHERE r.idempotency_key = p_key AND r.status = 'FAILED'
                       AND r.version = v_version AND r.retry_allowed
                    RETURNING r.status, r.version INTO status, version;
                    IF NOT FOUND THEN
                        CONTINUE;  -- a concurrent caller re-claimed it first: look again
                    END IF;
                    outcome := 'executed';
                    claim_token := v_token;
                EXCEPTION WHEN unique_violation THEN
                    -- Another key for this business object is in flight or succeeded.
                    outcome := 'rejected'; status := 'FAILED'; version := v_version;
                END;
                v_ctx := idem.act('', '', '');
            END IF;
            EXIT;
        END IF;

        -- No record under this key: the business object is live under another key.
        SELECT r.status INTO v_status
          FROM idem.records AS r
         WHERE r.biz_type = p_biz_type AND r.biz_id = p_biz_id AND r.status <> 'FAILED';
        IF FOUND THEN
            outcome := 'rejected'; status := NULL; version := NULL;
            EXIT;
        END IF;
    END LOOP;

    IF outcome IS NULL THEN
        RAISE EXCEPTION 'idem.begin(%): the record kept changing under concurrent callers; retry',
            p_key USING ERRCODE = 'serialization_failure';
    END IF;

    INSERT INTO idem.attempts (idempotency_key, biz_type, biz_id, tool, trigger_source, outcome,
                               request_hash, agent_id, trace_id)
    VALUES (p_key, p_biz_type, p_biz_id, p_tool, p_trigger_source, outcome, v_hash, p_agent_id,
            p_trace_id);
END
$$;

COMMENT ON FUNCTION idem.begin(text, text, text, text, text, text, jsonb, interval, text, text) IS
    'Claim an idempotency key (schema contract v3). outcome executed: you own the record; call downstream, then complete/fail/mark_unknown with the returned version and claim_token (returned only here; only its SHA-256 is stored). replayed: the outcome is final; status SUCCESS with response_payload the stored answer, or status FAILED (a final failure) with response_payload {"error": <the record''s last_error>}. in_progress: PROCESSING or UNKNOWN, do not call downstream. payload_mismatch: the key was used for a different request. rejected: the business object succeeded, is in flight under another key, or the ledger records its side effect. retired: the key was used and retention removed its record (status: what it was); do not execute. The same answers at every isolation level. Bounds: key 1..255, biz_type 1..64 of [A-Za-z0-9_.-], biz_id 1..255, tool 1..128, lease at most 24 hours (22023 otherwise).';

-- The money questions total under any ledger: their sums are numeric, never bigint that two large
-- amounts overflow ("bigint out of range" froze the exporter's money gauges and the console's
-- money tabs), and a total is reported within bigint's range, at its bound beyond it (which
-- takes over nine thousand flows of the largest amount on one business object). Signatures,
-- columns and grants are as in 013.
CREATE FUNCTION idem.minor_total(p_total numeric) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT least(greatest(p_total, -9223372036854775808), 9223372036854775807)::bigint $$;

COMMENT ON FUNCTION idem.minor_total(numeric) IS
    'A total of minor units as the money questions report it: the sum, within bigint''s range (at its bound beyond it).';

CREATE OR REPLACE FUNCTION idem.money_moved_without_success(
    p_biz_types text[], p_window interval, p_grace interval)
RETURNS TABLE (
    biz_type text, biz_id text,
    first_charge_id bigint, first_charge_at timestamptz, first_charge_ref text,
    charges bigint, charged_minor bigint, currency text,
    record_key text, record_status text, record_version integer,
    record_lease_expires_at timestamptz)
LANGUAGE plpgsql STABLE SET jit = off SET max_parallel_workers_per_gather = 0
AS $$ BEGIN RETURN QUERY
    SELECT u.biz_type::text, u.biz_id::text, c.id::bigint, c.created_at::timestamptz,
           c.ref::text, c.charges::bigint, idem.minor_total(c.total), c.currency::text, r.key::text,
           r.status::text, r.version::integer, r.lease_expires_at::timestamptz
      FROM (SELECT DISTINCT w.biz_type, w.biz_id
              FROM (SELECT f.biz_type::text AS biz_type, f.biz_id::text AS biz_id
                      FROM idem.fund_flows AS f
                     WHERE f.kind IN ('DEBIT', 'CAPTURE')
                       AND f.biz_type = ANY(p_biz_types)
                       AND f.created_at >= now() - p_window
                       AND f.created_at < now() - p_grace) AS w
              LEFT JOIN (SELECT p.biz_type::text AS biz_type, p.biz_id::text AS biz_id
                           FROM idem.records AS p
                          WHERE p.updated_at >= now() - p_window - interval '1 hour'
                            AND p.status = 'SUCCESS') AS paid
                     ON paid.biz_type = w.biz_type AND paid.biz_id = w.biz_id
             WHERE paid.biz_id IS NULL
            OFFSET 0) AS u
     -- Its first charge by id, with the count of its charges and their total in that one's
     -- currency (window aggregates run before the LIMIT), and its most recently updated record.
     CROSS JOIN LATERAL (SELECT f.id, f.created_at, f.external_ref::text AS ref,
                                f.currency::text AS currency, count(*) OVER () AS charges,
                                sum(f.amount_minor::numeric) OVER (PARTITION BY f.currency) AS total
                           FROM idem.fund_flows AS f
                          WHERE f.kind IN ('DEBIT', 'CAPTURE')
                            AND f.biz_type = u.biz_type AND f.biz_id = u.biz_id
                          ORDER BY f.id
                          LIMIT 1) AS c
      LEFT JOIN LATERAL (SELECT l.idempotency_key::text AS key, l.status::text AS status, l.version,
                                l.lease_expires_at
                           FROM idem.records AS l
                          WHERE l.biz_type = u.biz_type AND (l.biz_id COLLATE "C") = u.biz_id
                          ORDER BY l.updated_at DESC, l.idempotency_key DESC
                          LIMIT 1) AS r ON true
     -- Two probes kept as subplans by their OFFSET 0 (see 012): a SUCCESS record, a SUCCESS tombstone.
     WHERE NOT EXISTS (SELECT FROM idem.records AS x
                        WHERE x.status = 'SUCCESS' AND x.biz_type = u.biz_type
                          AND x.biz_id = u.biz_id OFFSET 0)
       AND NOT EXISTS (SELECT FROM idem.retired_keys AS t
                        WHERE t.status = 'SUCCESS' AND t.biz_type = u.biz_type
                          AND t.biz_id = u.biz_id OFFSET 0);
END
$$;

CREATE OR REPLACE FUNCTION idem.overcharged_objects(
    p_biz_types text[], p_window interval)
RETURNS TABLE (
    biz_type text, biz_id text, currency text,
    charges bigint, charged_minor bigint, refunded_minor bigint, owed_minor bigint,
    flow_ids bigint[], idempotency_keys text[], agent_ids text[],
    first_charge_at timestamptz, last_flow_at timestamptz)
LANGUAGE plpgsql STABLE SET jit = off SET max_parallel_workers_per_gather = 0
AS $$ BEGIN RETURN QUERY
    SELECT t.biz_type::text, t.biz_id::text, t.currency::text, t.charges::bigint,
           idem.minor_total(t.charged), idem.minor_total(t.refunded),
           idem.minor_total(t.beyond_first - t.refunded),
           t.flow_ids::bigint[], t.keys::text[],
           coalesce((SELECT array_agg(DISTINCT a.agent_id ORDER BY a.agent_id)
                       FROM idem.attempts a
                      WHERE a.idempotency_key = ANY(t.keys) AND a.agent_id IS NOT NULL), '{}'),
           t.first_at::timestamptz, t.last_at::timestamptz
      FROM (SELECT g.biz_type, g.biz_id, g.currency,
                   count(*) FILTER (WHERE g.charge) AS charges,
                   coalesce(sum(g.amount_minor) FILTER (WHERE g.charge), 0) AS charged,
                   coalesce(sum(g.amount_minor) FILTER (WHERE g.kind = 'REFUND'), 0) AS refunded,
                   coalesce(sum(g.amount_minor) FILTER (WHERE g.charge AND g.id <> g.first_id),
                            0) AS beyond_first,
                   array_agg(g.id ORDER BY g.id) FILTER (WHERE g.charge) AS flow_ids,
                   coalesce(array_agg(DISTINCT g.idempotency_key)
                                FILTER (WHERE g.charge AND g.idempotency_key IS NOT NULL),
                            '{}') AS keys,
                   min(g.first_at) AS first_at,
                   max(g.created_at) FILTER (WHERE g.charge OR g.kind = 'REFUND') AS last_at,
                   bool_or(g.latest_charge_at >= now() - p_window) AS charged_in_window
              FROM (SELECT f.biz_type::text AS biz_type, f.biz_id::text AS biz_id,
                           f.currency::text AS currency, f.kind::text AS kind, f.id,
                           f.amount_minor::numeric AS amount_minor,
                           f.idempotency_key::text AS idempotency_key, f.created_at,
                           f.kind IN ('DEBIT', 'CAPTURE') AS charge,
                           first_value(f.id) OVER o AS first_id,
                           first_value(f.created_at) OVER o AS first_at,
                           max(f.created_at) FILTER (WHERE f.kind IN ('DEBIT', 'CAPTURE'))
                               OVER (PARTITION BY f.biz_type, f.biz_id) AS latest_charge_at
                      FROM idem.charged_objects AS co
                      JOIN idem.fund_flows AS f
                        ON f.biz_type = co.biz_type AND f.biz_id = co.biz_id
                     WHERE co.charges > 1
                       AND co.last_charge_at >= now() - p_window
                       AND co.biz_type = ANY(p_biz_types)
                    WINDOW o AS (PARTITION BY f.biz_type, f.biz_id
                                 ORDER BY f.kind IN ('DEBIT', 'CAPTURE') DESC, f.id
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)) AS g
             GROUP BY g.biz_type, g.biz_id, g.currency) AS t
     WHERE t.beyond_first - t.refunded > 0
       AND t.charged_in_window;
END
$$;

-- Retention waits for the claims in flight (retention's lock, their records' rows) at most this
-- long, then stops with lock_not_available (55P03) and changes nothing: a writer that holds its
-- transaction open after begin cannot make purge wait for ever. idemctl purge names the sessions
-- it waited for.
ALTER FUNCTION idem.purge(interval) SET lock_timeout = '10s';

-- Ownership and grants, as 009 requires of every later object: owned by idem_owner, nothing for
-- PUBLIC, exactly the contract's table (shared/src/migrations.cpp, expectedFunctionGrants).
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'idem_ledger') THEN
        BEGIN
            CREATE ROLE idem_ledger NOLOGIN;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;  -- another database of this cluster created it at the same moment
        END;
    END IF;
END
$$;

ALTER TABLE idem.business_types OWNER TO idem_owner;
ALTER TABLE idem.ledger_objects OWNER TO idem_owner;
ALTER VIEW idem.side_effect_position OWNER TO idem_owner;
ALTER FUNCTION idem.touch_ledger_object(text, text) OWNER TO idem_owner;
ALTER FUNCTION idem.flow_touches_object() OWNER TO idem_owner;
ALTER FUNCTION idem.business_type(text) OWNER TO idem_owner;
ALTER FUNCTION idem.side_effect_recorded(text, text, text) OWNER TO idem_owner;
ALTER FUNCTION idem.side_effect_of(text) OWNER TO idem_owner;
ALTER FUNCTION idem.declare_business_type(text, text[], text[], text) OWNER TO idem_owner;
ALTER FUNCTION idem.check_fund_flow(text, text, text, bigint, text, text) OWNER TO idem_owner;
ALTER FUNCTION idem.write_fund_flow(text, text, text, bigint, text, text, text, text) OWNER TO idem_owner;
ALTER FUNCTION idem.record_fund_flow(text, text, text, bigint, text, text, text, uuid) OWNER TO idem_owner;
ALTER FUNCTION idem.has_visible_text(text) OWNER TO idem_owner;
ALTER FUNCTION idem.minor_total(numeric) OWNER TO idem_owner;

REVOKE ALL ON FUNCTION
    idem.touch_ledger_object(text, text),
    idem.flow_touches_object(),
    idem.business_type(text),
    idem.side_effect_recorded(text, text, text),
    idem.side_effect_of(text),
    idem.declare_business_type(text, text[], text[], text),
    idem.check_fund_flow(text, text, text, bigint, text, text),
    idem.write_fund_flow(text, text, text, bigint, text, text, text, text),
    idem.record_fund_flow(text, text, text, bigint, text, text, text, uuid),
    idem.has_visible_text(text),
    idem.minor_total(numeric)
FROM PUBLIC;

GRANT USAGE ON SCHEMA idem TO idem_ledger;

-- The ledger's two writers.
REVOKE EXECUTE ON FUNCTION idem.record_fund_flow(text, text, text, bigint, text, text, text)
    FROM idem_writer;
GRANT EXECUTE ON FUNCTION idem.record_fund_flow(text, text, text, bigint, text, text, text)
    TO idem_ledger;
GRANT EXECUTE ON FUNCTION idem.record_fund_flow(text, text, text, bigint, text, text, text, uuid)
    TO idem_writer;

-- Reading the side effects: the exporter, the admin app, the reconciler. The functions read as
-- their caller, so the readers also need the tables they read.
GRANT SELECT ON idem.business_types, idem.side_effect_position
    TO idem_reader, idem_operator, idem_reconciler;
GRANT EXECUTE ON FUNCTION
    idem.business_type(text),
    idem.side_effect_recorded(text, text, text),
    idem.side_effect_of(text)
TO idem_reader, idem_operator, idem_reconciler;
-- The money questions run as their caller, and total through idem.minor_total.
GRANT EXECUTE ON FUNCTION idem.minor_total(numeric) TO idem_reader, idem_operator;
