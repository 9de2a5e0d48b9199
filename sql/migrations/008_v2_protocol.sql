-- Schema contract version 2 (docs/contract/schema.md, "Functions"), part 3 of 4: the protocol with
-- claim tokens, final failures, the reconciler's functions and retention that leaves tombstones.
--
-- The version-1 signatures are dropped, not kept beside the new ones: a 3-argument complete that
-- needs no token would let any writer finish another's claim, the very thing the token prevents.
--
-- State-changing functions return (result, status, version): result is ok, conflict (the version
-- moved on), invalid_transition, not_found, not_claimant (the claim token does not match),
-- lease_active (a PROCESSING record whose claimant may still answer) or money_moved; status and
-- version are the record's after the call, or its current ones when refused, except:
--   not_found     status and version NULL.
--   not_claimant  status and version NULL: a caller without the token learns nothing from the
--                 answer but that the key exists (which begin tells anyone), and is checked before
--                 the version, so probing versions with a wrong token gives nothing away.
-- Refusals are checked in this order: not_found, not_claimant (claimant functions), conflict,
-- invalid_transition, lease_active, money_moved.

DROP FUNCTION idem.begin(text, text, text, text, text, text, jsonb, interval, text, text);
DROP FUNCTION idem.complete(text, integer, jsonb);
DROP FUNCTION idem.fail(text, integer, text);
DROP FUNCTION idem.mark_unknown(text, integer, text);
DROP FUNCTION idem.settle(text, integer, text, text, jsonb);
DROP FUNCTION idem.purge(interval);
DROP FUNCTION idem.refusal(text, integer);

-- Who acts and why, for the trigger (sql/007_v2_state_machine.sql): transaction-local settings.
-- An SQL function so that PL/pgSQL evaluates it as a simple expression, without running a query.
CREATE OR REPLACE FUNCTION idem.act(p_actor_kind text, p_reason text, p_evidence text) RETURNS text
LANGUAGE sql VOLATILE
AS $$
    SELECT pg_catalog.set_config('idem.actor_kind', p_actor_kind, true)
        || pg_catalog.set_config('idem.reason', p_reason, true)
        || pg_catalog.set_config('idem.evidence', p_evidence, true)
$$;

-- The stored form of a claim token: SHA-256 of its 16 bytes.
CREATE FUNCTION idem.token_hash(p_token uuid) RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT pg_catalog.sha256(pg_catalog.uuid_send(p_token)) $$;

-- Why a claimant's answer (complete, fail, mark_unknown) was refused.
CREATE FUNCTION idem.claimant_refusal(p_key text, p_expected_version integer, p_token uuid,
                                      OUT result text, OUT status text, OUT version integer)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN r.idempotency_key IS NULL THEN 'not_found'
                WHEN p_token IS NULL OR r.claim_token_hash IS DISTINCT FROM idem.token_hash(p_token)
                    THEN 'not_claimant'
                WHEN r.version IS DISTINCT FROM p_expected_version THEN 'conflict'
                ELSE 'invalid_transition' END,
           CASE WHEN p_token IS NOT NULL AND r.claim_token_hash = idem.token_hash(p_token)
                THEN r.status END,
           CASE WHEN p_token IS NOT NULL AND r.claim_token_hash = idem.token_hash(p_token)
                THEN r.version END
    FROM (SELECT 1) AS one
    LEFT JOIN idem.records AS r ON r.idempotency_key = p_key
$$;

-- The bounds of the contract (v2) for what a decision carries. 22023 invalid_parameter_value,
-- naming the field and the limit; checked before anything changes.
CREATE FUNCTION idem.check_decision(p_what text, p_to_status text, p_reason text, p_evidence jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_to_status IS NULL OR p_to_status NOT IN ('SUCCESS', 'FAILED') THEN
        RAISE EXCEPTION '% moves a record to SUCCESS or FAILED, not %', p_what,
            coalesce(quote_literal(p_to_status), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF idem.is_blank(p_reason) THEN
        RAISE EXCEPTION '% needs a reason (not empty, not only whitespace): say what evidence the decision rests on',
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

CREATE FUNCTION idem.begin(
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
    v_hash := coalesce(p_request_hash,
                       encode(sha256(convert_to(p_request_payload::text, 'UTF8')), 'hex'));
    IF v_hash IS NULL THEN
        RAISE EXCEPTION 'request_hash and request_payload are both NULL: one is needed to recognise a retry'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    v_token := gen_random_uuid();
    v_token_hash := idem.token_hash(v_token);
    -- The trigger admits an INSERT only under this mark (sql/007_v2_state_machine.sql). An
    -- assignment, which PL/pgSQL evaluates as a simple expression; PERFORM would run a query.
    v_ctx := set_config('idem.creating', p_key, true);

    -- A few rounds at most: a round only repeats when the row we conflicted with vanished (retention)
    -- or was re-claimed by a concurrent caller between our statements.
    FOR round IN 1..5 LOOP
        -- The unique indexes decide: the key's primary key and the one-live-record-per-business-
        -- object index. Whoever inserts first owns the record; everyone else waits for that
        -- transaction and then finds the row. The common case, a new key, is one statement that
        -- also writes the creation's history and the attempt.
        WITH claimed AS (
            INSERT INTO idem.records (idempotency_key, biz_type, biz_id, tool, request_hash, status,
                                      lease_expires_at, request_payload, claim_token_hash)
            VALUES (p_key, p_biz_type, p_biz_id, p_tool, v_hash, 'PROCESSING', now() + p_lease,
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
            -- the insert, so that its snapshot includes a purge that committed while the insert
            -- waited on the row it deleted (checked before, it would have been missed).
            SELECT (SELECT t.status FROM idem.retired_keys AS t WHERE t.idempotency_key = p_key),
                   EXISTS (SELECT 1 FROM idem.retired_keys AS t
                            WHERE t.biz_type = p_biz_type AND t.biz_id = p_biz_id
                              AND t.status = 'SUCCESS'),
                   EXISTS (SELECT 1 FROM idem.fund_flows AS f
                            WHERE f.biz_type = p_biz_type AND f.biz_id = p_biz_id)
              INTO v_retired, v_paid, v_moved;
            -- A new business object has no flows yet: only when it has some is the money rule
            -- (idem.money_position, an aggregate: 20 µs against 6 µs for the probe) asked.
            IF v_moved THEN
                v_moved := coalesce((SELECT m.money_moved FROM idem.money_position AS m
                                      WHERE m.biz_type = p_biz_type AND m.biz_id = p_biz_id), false);
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
            DELETE FROM idem.records AS r WHERE r.idempotency_key = p_key;
            IF v_retired IS NOT NULL THEN
                outcome := 'retired'; status := v_retired;
            ELSE
                -- Paid before retention removed its record, or money moved for it under a key
                -- whose record failed: another execution would charge again.
                outcome := 'rejected'; status := NULL;
            END IF;
            version := NULL;
            EXIT;
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
            ELSIF coalesce((SELECT m.money_moved FROM idem.money_position AS m
                             WHERE m.biz_type = p_biz_type AND m.biz_id = p_biz_id), false) THEN
                outcome := 'rejected';
            ELSE
                -- A failure that certainly did not reach downstream: the same request may run
                -- again, under a new token.
                v_ctx := idem.act('system', 'retried after FAILED (' || p_trigger_source || ')', '');
                BEGIN
                    UPDATE idem.records AS r
                       SET status = 'PROCESSING', lease_expires_at = now() + p_lease,
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
    'Claim an idempotency key (schema contract v2). outcome executed: you own the record; call downstream, then complete/fail/mark_unknown with the returned version and claim_token (returned only here; only its SHA-256 is stored). replayed: the outcome is final; status SUCCESS with response_payload the stored answer, or status FAILED (a final failure) with response_payload {"error": <the record''s last_error>}. in_progress: PROCESSING or UNKNOWN, do not call downstream. payload_mismatch: the key was used for a different request. rejected: the business object succeeded, is in flight under another key, or money moved for it. retired: the key was used and retention removed its record (status: what it was); do not execute. Bounds: key 1..255, biz_type 1..64 of [A-Za-z0-9_.-], biz_id 1..255, tool 1..128, lease at most 24 hours (22023 otherwise).';

CREATE FUNCTION idem.complete(p_key text, p_expected_version integer, p_response_payload jsonb,
                              p_claim_token uuid,
                              OUT result text, OUT status text, OUT version integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_ctx text;
BEGIN
    v_ctx := idem.act('system', '', '');
    -- One statement, no read before it: the token, the version and the state are its conditions.
    UPDATE idem.records AS r
       SET status = 'SUCCESS', response_payload = p_response_payload
     WHERE r.idempotency_key = p_key AND r.version = p_expected_version
       AND r.status IN ('PROCESSING', 'UNKNOWN')
       AND r.claim_token_hash = idem.token_hash(p_claim_token)
    RETURNING 'ok', r.status, r.version INTO result, status, version;
    IF NOT FOUND THEN
        SELECT * INTO result, status, version
          FROM idem.claimant_refusal(p_key, p_expected_version, p_claim_token);
    END IF;
END
$$;

COMMENT ON FUNCTION idem.complete(text, integer, jsonb, uuid) IS
    'The claimant reports success (PROCESSING or UNKNOWN -> SUCCESS) with the claim token begin gave it. result ok | conflict | invalid_transition | not_found | not_claimant (status and version NULL, nothing changes).';

CREATE FUNCTION idem.fail(p_key text, p_expected_version integer, p_error text,
                          p_claim_token uuid, p_retry_allowed boolean DEFAULT false,
                          OUT result text, OUT status text, OUT version integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_ctx text;
BEGIN
    v_ctx := idem.act('system', coalesce(p_error, ''), '');
    UPDATE idem.records AS r
       SET status = 'FAILED', last_error = p_error,
           retry_allowed = coalesce(p_retry_allowed, false)
     WHERE r.idempotency_key = p_key AND r.version = p_expected_version
       AND r.status = 'PROCESSING'
       AND r.claim_token_hash = idem.token_hash(p_claim_token)
    RETURNING 'ok', r.status, r.version INTO result, status, version;
    IF NOT FOUND THEN
        SELECT * INTO result, status, version
          FROM idem.claimant_refusal(p_key, p_expected_version, p_claim_token);
    END IF;
END
$$;

COMMENT ON FUNCTION idem.fail(text, integer, text, uuid, boolean) IS
    'The claimant reports a definite failure (PROCESSING -> FAILED; an UNKNOWN record is decided only by resolve or settle). retry_allowed false (the default): final, a retry with the same request is replayed status FAILED with response_payload {"error": error}; the error is kept in records.last_error. true: the request certainly never reached downstream, the same request may be claimed again unless money moved. result as complete.';

CREATE FUNCTION idem.mark_unknown(p_key text, p_expected_version integer, p_reason text,
                                  p_claim_token uuid,
                                  OUT result text, OUT status text, OUT version integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_ctx text;
BEGIN
    v_ctx := idem.act('system', coalesce(p_reason, ''), '');
    UPDATE idem.records AS r
       SET status = 'UNKNOWN', last_error = p_reason
     WHERE r.idempotency_key = p_key AND r.version = p_expected_version
       AND r.status = 'PROCESSING'
       AND r.claim_token_hash = idem.token_hash(p_claim_token)
    RETURNING 'ok', r.status, r.version INTO result, status, version;
    IF NOT FOUND THEN
        SELECT * INTO result, status, version
          FROM idem.claimant_refusal(p_key, p_expected_version, p_claim_token);
    END IF;
END
$$;

COMMENT ON FUNCTION idem.mark_unknown(text, integer, text, uuid) IS
    'The claimant reports that it cannot know the outcome (PROCESSING -> UNKNOWN: a response timeout). Never a failure: evidence or a person decides. result as complete.';

-- The one decision path of the operator (settle) and the reconciler (resolve): lock the record,
-- answer with the refusal that applies, else change it. Not granted to anyone: the two callers are.
CREATE FUNCTION idem.decide(p_kind text, p_key text, p_expected_version integer,
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
        SELECT to_jsonb(m) INTO v_position
          FROM idem.money_position AS m WHERE m.biz_type = r.biz_type AND m.biz_id = r.biz_id;
        IF coalesce((v_position ->> 'money_moved')::boolean, false) THEN
            IF NOT coalesce(p_override_money_moved, false) THEN
                result := 'money_moved';
                RETURN;
            END IF;
            -- The override is part of the record's history: who, and the position overridden.
            v_evidence := CASE WHEN v_evidence IS NULL THEN '{}'::jsonb
                               WHEN jsonb_typeof(v_evidence) = 'object' THEN v_evidence
                               ELSE jsonb_build_object('evidence', v_evidence) END
                          || jsonb_build_object('override_money_moved',
                                 jsonb_build_object('by', session_user, 'money_position', v_position));
            PERFORM set_config('idem.override_money_moved', 'on', true);
        END IF;
    END IF;

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

-- The operator's decision on a record no machine could settle. The reason is required; the
-- version is the one the operator saw, so a decision made on stale information is refused.
CREATE FUNCTION idem.settle(p_key text, p_expected_version integer, p_to_status text,
                            p_reason text, p_evidence jsonb DEFAULT NULL,
                            p_override_money_moved boolean DEFAULT false,
                            OUT result text, OUT status text, OUT version integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM idem.check_decision('settle', p_to_status, p_reason, p_evidence);
    SELECT * INTO result, status, version
      FROM idem.decide('operator', p_key, p_expected_version, p_to_status, p_reason, p_evidence,
                       p_override_money_moved);
END
$$;

COMMENT ON FUNCTION idem.settle(text, integer, text, text, jsonb, boolean) IS
    'The operator''s decision (schema contract v2): UNKNOWN or PROCESSING past its lease -> SUCCESS or FAILED, or FAILED -> SUCCESS (a correction: the money moved after all). Reason required (not blank, at most 2000 characters), evidence at most 64 KiB. result ok | conflict | invalid_transition | not_found | lease_active (PROCESSING, lease live: the claimant may still answer) | money_moved (FAILED refused: see idem.money_position) unless override_money_moved, which the transition''s evidence then records under "override_money_moved". Settling FAILED sets retry_allowed.';

-- The reconciler's decision from evidence it found (a gateway lookup, a statement line).
CREATE FUNCTION idem.resolve(p_key text, p_expected_version integer, p_to_status text,
                             p_reason text, p_evidence jsonb,
                             OUT result text, OUT status text, OUT version integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM idem.check_decision('resolve', p_to_status, p_reason, p_evidence);
    IF p_evidence IS NULL OR jsonb_typeof(p_evidence) <> 'object' OR p_evidence = '{}'::jsonb THEN
        RAISE EXCEPTION 'resolve needs evidence: a non-empty JSON object (what the lookup found), got %',
            coalesce(left(p_evidence::text, 40), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO result, status, version
      FROM idem.decide('reconciler', p_key, p_expected_version, p_to_status, p_reason, p_evidence,
                       false);
END
$$;

COMMENT ON FUNCTION idem.resolve(text, integer, text, text, jsonb) IS
    'The reconciler''s decision from evidence (schema contract v2): UNKNOWN or PROCESSING past its lease -> SUCCESS or FAILED; evidence a required non-empty JSON object (at most 64 KiB), reason required (at most 2000 characters). result ok | conflict | invalid_transition | not_found | lease_active | money_moved (FAILED refused, no override). Resolving FAILED sets retry_allowed. Actor kind reconciler.';

-- Evidence the machine can read: a DEBIT or CAPTURE flow that names the record's own key (of its
-- own business object). Records being changed right now are skipped (SKIP LOCKED): a concurrent
-- complete, settle or reconcile is deciding them, and the row lock plus the version condition
-- below leave exactly one winner.
CREATE FUNCTION idem.reconcile() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c       record;
    v_count integer := 0;
    v_ctx   text;
    v_n     integer;
BEGIN
    FOR c IN
        SELECT r.idempotency_key, r.version, ev.flows
          FROM idem.records AS r
         CROSS JOIN LATERAL (
               SELECT jsonb_agg(jsonb_build_object('id', f.id, 'external_ref', f.external_ref,
                                                   'kind', f.kind, 'amount_minor', f.amount_minor,
                                                   'currency', f.currency) ORDER BY f.id) AS flows
                 FROM idem.fund_flows AS f
                WHERE f.biz_type = r.biz_type AND f.biz_id = r.biz_id
                  AND f.idempotency_key = r.idempotency_key
                  AND f.kind IN ('DEBIT', 'CAPTURE')) AS ev
         WHERE (r.status = 'UNKNOWN' OR (r.status = 'PROCESSING' AND r.lease_expires_at < now()))
           AND ev.flows IS NOT NULL
         ORDER BY r.idempotency_key
           FOR UPDATE OF r SKIP LOCKED
    LOOP
        v_ctx := idem.act('reconciler', 'reconcile: money moved under the record''s own key',
                          jsonb_build_object('flows', c.flows)::text);
        UPDATE idem.records AS r
           SET status = 'SUCCESS',
               response_payload = coalesce(r.response_payload,
                   jsonb_build_object('resolved_by', session_user,
                                      'reason', 'reconcile: money moved under the record''s own key',
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
    'Resolves to SUCCESS (actor kind reconciler) every UNKNOWN record and every PROCESSING record past its lease that has a DEBIT or CAPTURE flow naming its own idempotency_key (and business object); the evidence lists those flows'' ids and external_refs. Returns how many. Never decides FAILED: the absence of a flow is not evidence. Safe to run concurrently (SKIP LOCKED) and against complete (one winner).';

-- Retention (schema contract v2): removes SUCCESS and FAILED records not changed for p_older_than,
-- each leaving its tombstone in idem.retired_keys in the same statement; then the old attempts and
-- transitions of keys that have no record any more or a SUCCESS one (final, it can never be in
-- flight again). The history of a PROCESSING, UNKNOWN or FAILED record (FAILED may be claimed
-- again) is never touched. Counters published by the exporter never go backwards: it reads new rows
-- by id and never re-counts. Fund flows are the ledger and are kept. Not granted to any idem_*
-- role: run it as the owner (a member of idem_owner).
CREATE FUNCTION idem.purge(p_older_than interval,
                           OUT records_deleted bigint, OUT attempts_deleted bigint,
                           OUT transitions_deleted bigint, OUT tombstones_written bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_cutoff timestamptz;
BEGIN
    IF p_older_than IS NULL OR p_older_than <= interval '0' THEN
        RAISE EXCEPTION 'purge needs a positive age, got %',
            coalesce(p_older_than::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_cutoff := now() - p_older_than;
    -- A record a concurrent begin re-claims is locked by it; the DELETE waits, re-checks the status
    -- and leaves the now PROCESSING record alone.
    WITH gone AS (
        DELETE FROM idem.records AS r
         WHERE r.status IN ('SUCCESS', 'FAILED') AND r.updated_at < v_cutoff
        RETURNING r.idempotency_key, r.biz_type, r.biz_id, r.request_hash, r.status)
    INSERT INTO idem.retired_keys AS t (idempotency_key, biz_type, biz_id, request_hash, status)
    SELECT g.idempotency_key, g.biz_type, g.biz_id, g.request_hash, g.status FROM gone AS g
    ON CONFLICT (idempotency_key) DO UPDATE
       SET biz_type = excluded.biz_type, biz_id = excluded.biz_id,
           request_hash = excluded.request_hash, status = excluded.status,
           retired_at = excluded.retired_at;
    GET DIAGNOSTICS tombstones_written = ROW_COUNT;
    records_deleted := tombstones_written;

    DELETE FROM idem.attempts AS a
     WHERE a.created_at < v_cutoff
       AND NOT EXISTS (SELECT 1 FROM idem.records AS r
                        WHERE r.idempotency_key = a.idempotency_key AND r.status <> 'SUCCESS');
    GET DIAGNOSTICS attempts_deleted = ROW_COUNT;
    DELETE FROM idem.transitions AS t
     WHERE t.created_at < v_cutoff
       AND NOT EXISTS (SELECT 1 FROM idem.records AS r
                        WHERE r.idempotency_key = t.idempotency_key AND r.status <> 'SUCCESS');
    GET DIAGNOSTICS transitions_deleted = ROW_COUNT;
END
$$;

COMMENT ON FUNCTION idem.purge(interval) IS
    'Retention (schema contract v2): removes SUCCESS/FAILED records older than the age, each leaving a tombstone in idem.retired_keys (a later begin under the key is retired; a new key for a paid business object is rejected), and old attempts/transitions of keys with no record or a SUCCESS one; never anything of a PROCESSING, UNKNOWN or FAILED record. Returns records_deleted, attempts_deleted, transitions_deleted, tombstones_written.';

-- (v2: the bounds of biz_type and biz_id.) Ingest one line of the gateway's ledger. The same external_ref twice is a no-op that returns the
-- first row; a different external_ref for a business object and kind that already has a flow is
-- recorded as a duplicate of the first: that is the double charge, surfaced, never refused.
CREATE OR REPLACE FUNCTION idem.record_fund_flow(
    p_biz_type text, p_biz_id text, p_kind text, p_amount_minor bigint, p_currency text,
    p_external_ref text, p_idempotency_key text DEFAULT NULL,
    OUT flow_id bigint, OUT is_duplicate boolean, OUT already_recorded boolean)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_first bigint;
BEGIN
    IF p_kind IS NULL OR p_kind NOT IN ('DEBIT', 'CREDIT', 'REFUND', 'FREEZE', 'UNFREEZE', 'CAPTURE') THEN
        RAISE EXCEPTION 'unknown fund flow kind %: expected DEBIT, CREDIT, REFUND, FREEZE, UNFREEZE or CAPTURE',
            coalesce(quote_literal(p_kind), 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_currency IS NULL OR p_currency !~ '^[A-Z]{3}$' THEN
        RAISE EXCEPTION 'currency must be three capital letters (ISO 4217), got %',
            coalesce(quote_literal(p_currency), 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_amount_minor IS NULL OR p_amount_minor < 0 THEN
        RAISE EXCEPTION 'amount_minor must be a non-negative number of minor units, got %',
            coalesce(p_amount_minor::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The bounds of idem.begin (schema contract v2): biz_type becomes a metric label here too.
    IF p_biz_type IS NULL OR p_biz_type !~ '^[A-Za-z0-9_.-]{1,64}$' THEN
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
    IF idem.is_blank(p_external_ref) THEN
        RAISE EXCEPTION 'external_ref must not be blank'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    FOR round IN 1..5 LOOP
        -- Try to be the first flow of this business object and kind; the partial unique index
        -- (and the external_ref one) arbitrate between concurrent inserts.
        INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, external_ref,
                                     idempotency_key, duplicate_of)
        VALUES (p_biz_type, p_biz_id, p_kind, p_amount_minor, p_currency, p_external_ref,
                p_idempotency_key, NULL)
        ON CONFLICT DO NOTHING
        RETURNING id INTO flow_id;
        IF FOUND THEN
            is_duplicate := false; already_recorded := false;
            RETURN;
        END IF;

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
        IF FOUND THEN
            INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency,
                                         external_ref, idempotency_key, duplicate_of)
            VALUES (p_biz_type, p_biz_id, p_kind, p_amount_minor, p_currency, p_external_ref,
                    p_idempotency_key, v_first)
            ON CONFLICT DO NOTHING
            RETURNING id INTO flow_id;
            IF FOUND THEN
                is_duplicate := true; already_recorded := false;
                RETURN;
            END IF;
        END IF;
        -- The same external_ref arrived concurrently, or the first flow vanished: look again.
    END LOOP;
    RAISE EXCEPTION 'idem.record_fund_flow(%): the ledger kept changing under concurrent callers; retry',
        p_external_ref USING ERRCODE = 'serialization_failure';
END
$$;

-- Tombstones, on a much longer horizon than records: once removed, the key could run again.
CREATE FUNCTION idem.purge_retired(p_older_than interval) RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count bigint;
BEGIN
    IF p_older_than IS NULL OR p_older_than <= interval '0' THEN
        RAISE EXCEPTION 'purge_retired needs a positive age, got %',
            coalesce(p_older_than::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM idem.retired_keys AS t WHERE t.retired_at < now() - p_older_than;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION idem.purge_retired(interval) IS
    'Removes tombstones of idem.retired_keys older than the age; returns how many. A key whose tombstone is gone may run again: use a horizon far beyond any retry.';

COMMENT ON FUNCTION idem.expire_leases() IS
    'PROCESSING past its lease becomes UNKNOWN (actor kind system), for the reconciler or a person, never an automatic re-run; returns how many. Rows being changed right now are skipped.';

COMMENT ON FUNCTION idem.record_fund_flow(text, text, text, bigint, text, text, text) IS
    'Ingest one line of the gateway''s ledger: returns flow_id, is_duplicate (a different external_ref for an object and kind that had a flow: the double charge, recorded and flagged) and already_recorded (the same external_ref again: nothing written). biz_type and biz_id have begin''s bounds (22023).';
COMMENT ON FUNCTION idem.act(text, text, text) IS
    'Internal: sets who acts and why (idem.actor_kind, idem.reason, idem.evidence) for the records trigger, transaction-local.';
COMMENT ON FUNCTION idem.token_hash(uuid) IS
    'The stored form of a claim token: sha256(uuid_send(token)), in records.claim_token_hash.';
COMMENT ON FUNCTION idem.claimant_refusal(text, integer, uuid) IS
    'Internal: why complete/fail/mark_unknown changed nothing: not_found, not_claimant (status and version NULL), conflict or invalid_transition.';
COMMENT ON FUNCTION idem.check_decision(text, text, text, jsonb) IS
    'Internal: the bounds of a settle or resolve (to_status, reason not blank and at most 2000 characters, evidence at most 64 KiB), 22023 naming the field and the limit.';
COMMENT ON FUNCTION idem.decide(text, text, integer, text, text, jsonb, boolean) IS
    'Internal: the one decision path of settle (operator) and resolve (reconciler): locks the record, answers not_found, conflict, invalid_transition, lease_active or money_moved, else changes it.';
