-- 011: begin and purge serialised on retention's advisory lock (7347261900532).
--
-- Retention (idem.purge) now holds the lock exclusively while it removes records and writes their
-- tombstones; idem.begin holds it shared when it can, and then checks a new key's tombstone and
-- fund flows inside its insert statement, since no purge can commit between its statements. When
-- a purge runs or waits, begin falls back to the separate after-insert check of 008. Same
-- signatures, results and grants as 008 (CREATE OR REPLACE keeps the owner idem_owner and the
-- EXECUTE grants of 009); 008 itself is never edited, as no applied migration is.

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
    -- Retention (idem.purge) holds this advisory lock exclusively while it removes records and
    -- writes their tombstones. Holding it shared, this call knows that no purge commits between its
    -- statements: a purge has either committed before (its tombstones are in every snapshot taken
    -- from here on) or starts after this transaction. Then a new key's insert can check the
    -- tombstones in its own statement. When a purge runs or waits, the lock is refused at once
    -- and the insert is checked by a statement of its own, after it (below).
    v_fast := pg_try_advisory_xact_lock_shared(7347261900532);

    -- A few rounds at most: a round only repeats when the row we conflicted with vanished (retention)
    -- or was re-claimed by a concurrent caller between our statements.
    FOR round IN 1..5 LOOP
        -- The unique indexes decide: the key's primary key and the one-live-record-per-business-
        -- object index. Whoever inserts first owns the record; everyone else waits for that
        -- transaction and then finds the row. The common case, a new key, is one statement that
        -- also writes the creation's history and the attempt, and, on the fast path, checks that
        -- no tombstone names the key or a paid record of the business object and that the object
        -- has no fund flows yet. When one of those holds, nothing is inserted and the next round
        -- takes the checked path, which answers retired or rejected or runs the money rule.
        IF v_fast AND round = 1 THEN
            WITH claimed AS (
                INSERT INTO idem.records (idempotency_key, biz_type, biz_id, tool, request_hash,
                                          status, lease_expires_at, request_payload,
                                          claim_token_hash)
                SELECT p_key, p_biz_type, p_biz_id, p_tool, v_hash, 'PROCESSING', now() + p_lease,
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
                -- waited on the row it deleted (checked in the insert, it could have been missed).
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

CREATE OR REPLACE FUNCTION idem.purge(p_older_than interval,
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
    -- Exclusive against begin's shared hold (see idem.begin): waits for the begins in flight,
    -- and begins that arrive meanwhile check their inserts the slow way.
    PERFORM pg_advisory_xact_lock(7347261900532);
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
