-- The claim (docs/contract/schema.md, "Functions"): one call decides whether this request runs
-- (executed, with a claim token and a lease), is answered from the record (replayed), waits
-- (in_progress) or is refused (payload_mismatch, rejected, retired), under the side-effect rule,
-- with the same answers at READ COMMITTED, REPEATABLE READ and SERIALIZABLE.

CREATE OR REPLACE FUNCTION idem.begin(
    p_key text,
    p_biz_type text,
    p_biz_id text,
    p_tool text,
    p_request_hash text,
    p_trigger_source text,
    p_request_payload jsonb,
    p_lease interval DEFAULT '00:00:30'::interval,
    p_agent_id text DEFAULT NULL::text,
    p_trace_id text DEFAULT NULL::text,
    OUT outcome text,
    OUT status text,
    OUT version integer,
    OUT response_payload jsonb,
    OUT claim_token uuid)
 RETURNS record
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
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
       OR p_trigger_source <> ALL (idem.vocabulary('trigger_source')) THEN
        RAISE EXCEPTION 'unknown trigger_source %: expected %',
            coalesce(quote_literal(left(p_trigger_source, 40)), 'NULL'),
            array_to_string(idem.vocabulary('trigger_source'), ', ')
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
$function$;

COMMENT ON FUNCTION idem.begin(text, text, text, text, text, text, jsonb, interval, text, text) IS
    'Claim an idempotency key (schema contract v3). outcome executed: you own the record; call downstream, then complete/fail/mark_unknown with the returned version and claim_token (returned only here; only its SHA-256 is stored). replayed: the outcome is final; status SUCCESS with response_payload the stored answer, or status FAILED (a final failure) with response_payload {"error": <the record''s last_error>}. in_progress: PROCESSING or UNKNOWN, do not call downstream. payload_mismatch: the key was used for a different request. rejected: the business object succeeded, is in flight under another key, or the ledger records its side effect. retired: the key was used and retention removed its record (status: what it was); do not execute. The same answers at every isolation level. Bounds: key 1..255, biz_type 1..64 of [A-Za-z0-9_.-], biz_id 1..255, tool 1..128, lease at most 24 hours (22023 otherwise).';
