-- The protocol: the only way agent runtimes write the idem tables. Every function takes and returns
-- plain SQL types, runs as one statement (SELECT * FROM idem.begin(...)) in its caller's
-- READ COMMITTED transaction, and is SECURITY DEFINER so that callers need EXECUTE, not table rights.
--
-- State-changing functions return (result, status, version): result is one of ok, conflict (the
-- version moved on: someone else changed the record), invalid_transition, not_found; status and
-- version are the record's after the call (its current ones when refused, NULL when not found).

-- Who acts and why, for the trigger that writes idem.transitions (sql/002_state_machine.sql):
-- transaction-local settings. An SQL function so that PL/pgSQL evaluates it as a simple
-- expression, without running a query.
CREATE FUNCTION idem.act(p_actor_kind text, p_reason text, p_evidence text) RETURNS text
LANGUAGE sql VOLATILE
AS $$
    SELECT pg_catalog.set_config('idem.actor_kind', p_actor_kind, true)
        || pg_catalog.set_config('idem.reason', p_reason, true)
        || pg_catalog.set_config('idem.evidence', p_evidence, true)
$$;

-- Why a state change was refused. Precedence: a moved version is reported as conflict even when the
-- new status would also refuse the change, because "someone else acted" is what the caller must learn.
CREATE FUNCTION idem.refusal(p_key text, p_expected_version integer,
                             OUT result text, OUT status text, OUT version integer)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN r.idempotency_key IS NULL THEN 'not_found'
                WHEN r.version IS DISTINCT FROM p_expected_version THEN 'conflict'
                ELSE 'invalid_transition' END,
           r.status, r.version
    FROM (SELECT 1) AS one
    LEFT JOIN idem.records AS r ON r.idempotency_key = p_key
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
    OUT outcome text, OUT status text, OUT version integer, OUT response_payload jsonb)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_hash    text;
    v_status  text;
    v_version integer;
    v_rhash   text;
    v_rtype   text;
    v_rid     text;
    v_resp    jsonb;
    v_ctx     text;
BEGIN
    IF p_key IS NULL OR char_length(p_key) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'idempotency key must be 1 to 255 characters, got %',
            coalesce(char_length(p_key)::text || ' characters', 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_trigger_source IS NULL
       OR p_trigger_source NOT IN ('initial', 'llm', 'framework', 'http', 'callback') THEN
        RAISE EXCEPTION 'unknown trigger_source %: expected initial, llm, framework, http or callback',
            coalesce(quote_literal(p_trigger_source), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF btrim(coalesce(p_biz_type, '')) = '' OR btrim(coalesce(p_biz_id, '')) = ''
       OR btrim(coalesce(p_tool, '')) = '' THEN
        RAISE EXCEPTION 'biz_type, biz_id and tool must not be blank'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_lease IS NULL OR p_lease <= interval '0' THEN
        RAISE EXCEPTION 'lease must be a positive interval, got %', coalesce(p_lease::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_hash := coalesce(p_request_hash,
                       encode(sha256(convert_to(p_request_payload::text, 'UTF8')), 'hex'));
    IF v_hash IS NULL THEN
        RAISE EXCEPTION 'request_hash and request_payload are both NULL: one is needed to recognise a retry'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- A few rounds at most: a round only repeats when the row we conflicted with vanished (retention)
    -- or was re-claimed by a concurrent caller between our statements.
    FOR round IN 1..5 LOOP
        -- The unique indexes decide: the key's primary key and the one-live-record-per-business-
        -- object index. Whoever inserts first owns the record; everyone else waits for that
        -- transaction and then finds the row. The common case, a new key, costs one statement
        -- that also writes its attempt.
        WITH claimed AS (
            INSERT INTO idem.records (idempotency_key, biz_type, biz_id, tool, request_hash, status,
                                      lease_expires_at, request_payload)
            VALUES (p_key, p_biz_type, p_biz_id, p_tool, v_hash, 'PROCESSING', now() + p_lease,
                    p_request_payload)
            ON CONFLICT DO NOTHING
            RETURNING 1)
        INSERT INTO idem.attempts (idempotency_key, biz_type, biz_id, tool, trigger_source,
                                   outcome, request_hash, agent_id, trace_id)
        SELECT p_key, p_biz_type, p_biz_id, p_tool, p_trigger_source, 'executed', v_hash,
               p_agent_id, p_trace_id
          FROM claimed;
        IF FOUND THEN
            outcome := 'executed'; status := 'PROCESSING'; version := 1;
            RETURN;
        END IF;

        SELECT r.status, r.version, r.request_hash, r.biz_type, r.biz_id, r.response_payload
          INTO v_status, v_version, v_rhash, v_rtype, v_rid, v_resp
          FROM idem.records AS r WHERE r.idempotency_key = p_key;
        IF FOUND THEN
            status := v_status; version := v_version;
            IF v_rhash <> v_hash OR v_rtype <> p_biz_type OR v_rid <> p_biz_id THEN
                outcome := 'payload_mismatch';
            ELSIF v_status = 'SUCCESS' THEN
                outcome := 'replayed'; response_payload := v_resp;
            ELSIF v_status IN ('PROCESSING', 'UNKNOWN') THEN
                outcome := 'in_progress';
            ELSE
                -- FAILED is a definite failure: the same request may run again, once.
                v_ctx := idem.act('system', 'retried after FAILED (' || p_trigger_source || ')', '');
                BEGIN
                    UPDATE idem.records AS r
                       SET status = 'PROCESSING', lease_expires_at = now() + p_lease,
                           response_payload = NULL, attempt_count = r.attempt_count + 1,
                           request_payload = coalesce(p_request_payload, r.request_payload)
                     WHERE r.idempotency_key = p_key AND r.status = 'FAILED'
                       AND r.version = v_version
                    RETURNING r.status, r.version INTO status, version;
                    IF NOT FOUND THEN
                        CONTINUE;  -- a concurrent caller re-claimed it first: look again
                    END IF;
                    outcome := 'executed';
                EXCEPTION WHEN unique_violation THEN
                    -- Another key for this business object is in flight or succeeded.
                    outcome := 'rejected'; status := 'FAILED'; version := v_version;
                END;
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
    'Claim an idempotency key. outcome executed: you own the record, call downstream, then complete/fail/mark_unknown with the returned version. replayed: response_payload is the stored answer. in_progress: do not call downstream. payload_mismatch: the key was used for a different request. rejected: the business object is in flight or done under another key.';

CREATE FUNCTION idem.complete(p_key text, p_expected_version integer, p_response_payload jsonb,
                              OUT result text, OUT status text, OUT version integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_ctx text;
BEGIN
    v_ctx := idem.act('system', '', '');
    UPDATE idem.records AS r
       SET status = 'SUCCESS', response_payload = p_response_payload
     WHERE r.idempotency_key = p_key AND r.version = p_expected_version
       AND r.status IN ('PROCESSING', 'UNKNOWN')
    RETURNING 'ok', r.status, r.version INTO result, status, version;
    IF NOT FOUND THEN
        SELECT * INTO result, status, version FROM idem.refusal(p_key, p_expected_version);
    END IF;
END
$$;

CREATE FUNCTION idem.fail(p_key text, p_expected_version integer, p_error text,
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
       SET status = 'FAILED', last_error = p_error
     WHERE r.idempotency_key = p_key AND r.version = p_expected_version
       AND r.status IN ('PROCESSING', 'UNKNOWN')
    RETURNING 'ok', r.status, r.version INTO result, status, version;
    IF NOT FOUND THEN
        SELECT * INTO result, status, version FROM idem.refusal(p_key, p_expected_version);
    END IF;
END
$$;

CREATE FUNCTION idem.mark_unknown(p_key text, p_expected_version integer, p_reason text,
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
    RETURNING 'ok', r.status, r.version INTO result, status, version;
    IF NOT FOUND THEN
        SELECT * INTO result, status, version FROM idem.refusal(p_key, p_expected_version);
    END IF;
END
$$;

-- The operator's decision on a record no machine could settle. The reason is required; the
-- version is the one the operator saw, so a decision made on stale information is refused.
CREATE FUNCTION idem.settle(p_key text, p_expected_version integer, p_to_status text,
                            p_reason text, p_evidence jsonb DEFAULT NULL,
                            OUT result text, OUT status text, OUT version integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_ctx text;
BEGIN
    IF p_to_status IS NULL OR p_to_status NOT IN ('SUCCESS', 'FAILED') THEN
        RAISE EXCEPTION 'settle moves a record to SUCCESS or FAILED, not %',
            coalesce(quote_literal(p_to_status), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF btrim(coalesce(p_reason, '')) = '' THEN
        RAISE EXCEPTION 'settle needs a reason: say what evidence the decision rests on'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_ctx := idem.act('operator', p_reason, coalesce(p_evidence::text, ''));
    UPDATE idem.records AS r
       SET status = p_to_status,
           response_payload = CASE WHEN p_to_status = 'SUCCESS'
               THEN coalesce(r.response_payload,
                             jsonb_build_object('settled_by', session_user, 'reason', p_reason,
                                                'evidence', p_evidence))
               ELSE r.response_payload END,
           last_error = CASE WHEN p_to_status = 'FAILED'
               THEN 'settled FAILED by ' || session_user || ': ' || p_reason
               ELSE r.last_error END
     WHERE r.idempotency_key = p_key AND r.version = p_expected_version
       AND r.status IN ('PROCESSING', 'UNKNOWN')
    RETURNING 'ok', r.status, r.version INTO result, status, version;
    IF NOT FOUND THEN
        SELECT * INTO result, status, version FROM idem.refusal(p_key, p_expected_version);
    END IF;
    -- Later statements in this transaction must not inherit the operator's identity.
    v_ctx := idem.act('', '', '');
END
$$;

-- PROCESSING past its lease: the caller crashed or hung, and the side effect may have happened.
-- It becomes UNKNOWN, for a reconciler or a person, never for an automatic re-run. Rows a caller
-- is changing right now are skipped, which also keeps two concurrent sweeps from deadlocking.
CREATE FUNCTION idem.expire_leases() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count integer;
    v_ctx   text;
BEGIN
    v_ctx := idem.act('system', 'lease expired', '');
    UPDATE idem.records AS r
       SET status = 'UNKNOWN', last_error = 'lease expired at ' || r.lease_expires_at::text
     WHERE r.idempotency_key IN (
               SELECT x.idempotency_key FROM idem.records AS x
                WHERE x.status = 'PROCESSING' AND x.lease_expires_at < now()
                FOR UPDATE SKIP LOCKED)
       AND r.status = 'PROCESSING' AND r.lease_expires_at < now();
    GET DIAGNOSTICS v_count = ROW_COUNT;
    v_ctx := idem.act('', '', '');
    RETURN v_count;
END
$$;

-- Ingest one line of the gateway's ledger. The same external_ref twice is a no-op that returns the
-- first row; a different external_ref for a business object and kind that already has a flow is
-- recorded as a duplicate of the first: that is the double charge, surfaced, never refused.
CREATE FUNCTION idem.record_fund_flow(
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
    IF btrim(coalesce(p_external_ref, '')) = '' OR btrim(coalesce(p_biz_type, '')) = ''
       OR btrim(coalesce(p_biz_id, '')) = '' THEN
        RAISE EXCEPTION 'biz_type, biz_id and external_ref must not be blank'
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

-- Retention: delete terminal records, attempts and transitions older than p_older_than. Counters
-- published by the exporter never go backwards: it reads new rows by id and never re-counts.
-- Fund flows are the ledger and are kept. Not granted to any idem_* role: run it as the owner.
CREATE FUNCTION idem.purge(p_older_than interval,
                           OUT records_deleted bigint, OUT attempts_deleted bigint,
                           OUT transitions_deleted bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_older_than IS NULL OR p_older_than <= interval '0' THEN
        RAISE EXCEPTION 'purge needs a positive age, got %',
            coalesce(p_older_than::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM idem.records
     WHERE status IN ('SUCCESS', 'FAILED') AND updated_at < now() - p_older_than;
    GET DIAGNOSTICS records_deleted = ROW_COUNT;
    DELETE FROM idem.attempts WHERE created_at < now() - p_older_than;
    GET DIAGNOSTICS attempts_deleted = ROW_COUNT;
    DELETE FROM idem.transitions WHERE created_at < now() - p_older_than;
    GET DIAGNOSTICS transitions_deleted = ROW_COUNT;
END
$$;
