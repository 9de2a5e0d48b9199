-- A batch of a statement's lines (a JSON array of objects, as idemctl import-statement reads
-- them). A line id already held (from an earlier file) is the same line: nothing changes, unless
-- its amount, currency or kind differ, which stops the whole import (a gateway that changed a
-- line it already reported is a person's question). The same line id twice in one file stops it
-- too. Each new charge or refund line is matched and applied at once: the batch's lines matched
-- together (idem.match_gateway_lines), their flows written in one statement, each record an
-- effect resolves decided through idem.decide; a line whose outcome could depend on another line
-- of the batch goes the one-line way (idem.match_statement_line) in the file's order. A line id a
-- concurrent import of another file committed meanwhile stops this one with 40001 (retry).

CREATE OR REPLACE FUNCTION idem.add_statement_lines(p_statement_id bigint, p_lines jsonb)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    s      idem.statements;
    l      record;
    v_new  integer := 0;
    v_ok   boolean;
    v_decided text[] := '{}';
BEGIN
    SELECT * INTO s FROM idem.statements AS x WHERE x.id = p_statement_id;
    IF NOT FOUND OR s.opened_in IS DISTINCT FROM txid_current() THEN
        RAISE EXCEPTION 'statement % is not being imported in this transaction', p_statement_id
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Open it with idem.open_statement first, in the same transaction.';
    END IF;
    IF p_lines IS NULL OR jsonb_typeof(p_lines) <> 'array' THEN
        RAISE EXCEPTION 'statement lines come as a JSON array of objects, got %',
            coalesce(jsonb_typeof(p_lines), 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The batch's tables are this function's own, its owner's: a table of the same name that the
    -- caller made would run the caller's triggers (or rules) with the owner's rights.
    IF EXISTS (SELECT FROM pg_catalog.pg_class AS c
                WHERE c.relnamespace = pg_catalog.pg_my_temp_schema()
                  AND c.relname IN ('statement_batch', 'statement_held', 'statement_new')
                  AND (c.relowner <> (SELECT r.oid FROM pg_catalog.pg_roles AS r
                                       WHERE r.rolname = current_user)
                       OR c.relkind <> 'r')) THEN
        RAISE EXCEPTION 'a temporary table named statement_batch, statement_held or statement_new that idem did not make is in the way: drop it'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    CREATE TEMP TABLE IF NOT EXISTS statement_batch (
        line_id text, source_line bigint, category text, flow_kind text, amount_minor bigint,
        currency text, fee_minor bigint, booked_at timestamptz, value_date date,
        gateway_ref text, idempotency_key text, biz_id text, booked boolean, fields jsonb
    ) ON COMMIT DROP;
    TRUNCATE pg_temp.statement_batch;
    INSERT INTO pg_temp.statement_batch
    SELECT b.line_id, b.source_line, coalesce(b.category, ''), nullif(b.flow_kind, ''),
           b.amount_minor, upper(b.currency), b.fee_minor, b.booked_at, b.value_date,
           nullif(b.gateway_ref, ''), nullif(b.idempotency_key, ''), nullif(b.biz_id, ''),
           coalesce(b.booked, true), coalesce(b.fields, '{}'::jsonb)
      FROM jsonb_to_recordset(p_lines) AS b(
           line_id text, source_line bigint, category text, flow_kind text, amount_minor bigint,
           currency text, fee_minor bigint, booked_at timestamptz, value_date date,
           gateway_ref text, idempotency_key text, biz_id text, booked boolean, fields jsonb);

    SELECT b.source_line, b.line_id INTO l
      FROM pg_temp.statement_batch AS b
     WHERE b.line_id IS NULL OR btrim(b.line_id) = '' OR b.amount_minor IS NULL
        OR b.amount_minor < 0 OR b.currency IS NULL LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'line %: a statement line needs a line id, a currency and an amount of at least 0',
            l.source_line USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT b.line_id, min(b.source_line) AS first, max(b.source_line) AS again INTO l
      FROM pg_temp.statement_batch AS b GROUP BY b.line_id HAVING count(*) > 1
     ORDER BY min(b.source_line) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'line %: line id % repeats line % of the same file', l.again,
            quote_literal(l.line_id), l.first USING ERRCODE = 'unique_violation';
    END IF;
    -- Lines this gateway already has: from this file (a repeat), or from another file, the same.
    -- Looked up once a batch, one index probe a line (a join would scan the whole table, which
    -- grows with every batch of the file).
    CREATE TEMP TABLE IF NOT EXISTS statement_held (
        line_id text, source_line bigint, new_amount bigint, new_currency text, new_kind text,
        new_booked boolean, id bigint, statement_id bigint, held_line bigint, amount_minor bigint,
        currency text, flow_kind text, booked boolean
    ) ON COMMIT DROP;
    TRUNCATE pg_temp.statement_held;
    INSERT INTO pg_temp.statement_held
    SELECT b.line_id, b.source_line, b.amount_minor, b.currency, b.flow_kind, b.booked, x.*
      FROM pg_temp.statement_batch AS b
     CROSS JOIN LATERAL (
           SELECT x.id, x.statement_id, x.source_line, x.amount_minor, x.currency, x.flow_kind,
                  x.booked
             FROM idem.statement_lines AS x
            WHERE x.gateway = s.gateway AND x.line_id = b.line_id LIMIT 1) AS x;
    SELECT h.* INTO l
      FROM pg_temp.statement_held AS h
     WHERE h.statement_id = p_statement_id
        OR h.amount_minor <> h.new_amount OR h.currency <> h.new_currency
        OR h.flow_kind IS DISTINCT FROM h.new_kind
     ORDER BY h.source_line LIMIT 1;
    IF FOUND AND l.statement_id = p_statement_id THEN
        RAISE EXCEPTION 'line %: line id % repeats line % of the same file', l.source_line,
            quote_literal(l.line_id), l.held_line USING ERRCODE = 'unique_violation';
    ELSIF FOUND THEN
        RAISE EXCEPTION 'line %: line id % was imported from statement % as % % %, this file says % % %',
            l.source_line, quote_literal(l.line_id), l.statement_id,
            coalesce(l.flow_kind, 'no flow'), l.amount_minor, l.currency,
            coalesce(l.new_kind, 'no flow'), l.new_amount, l.new_currency
            USING ERRCODE = 'unique_violation',
                  HINT = 'A gateway that changed a line it had reported is a question for a person: nothing of this file was imported.';
    END IF;
    -- An entry pending before and booked now: the same line, now evidence.
    -- (Planned afresh, as the loop below: a plan cached at the file's first batch would scan.)
    IF EXISTS (SELECT FROM pg_temp.statement_held AS h
                WHERE NOT h.booked AND h.new_booked AND h.flow_kind IS NOT NULL) THEN
        EXECUTE $sql$
            UPDATE idem.statement_lines AS x
               SET booked = true, result = 'unmatched', matched_at = now()
              FROM pg_temp.statement_held AS h
             WHERE x.id = h.id AND NOT h.booked AND h.new_booked AND h.flow_kind IS NOT NULL
               AND NOT x.booked  -- a concurrent import booked and matched it meanwhile
        $sql$;
    END IF;

    -- The new lines, matched all at once (idem.match_gateway_lines: idem.match_gateway_line's
    -- rule, set-based). A line whose outcome could depend on another line of the batch is marked
    -- slow: it goes the one-line way (idem.match_statement_line), in the file's order, after the
    -- others. That is a line sharing its gateway reference with another (one's flow is what the
    -- other matches or is), a matched line of a business object and kind another matches too (the
    -- second is a duplicate of the first), an effect matched to the record another effect is (the
    -- first decides it). Every other line depends on no other: the order they are applied in is moot.
    CREATE TEMP TABLE IF NOT EXISTS statement_new (
        line_id text, source_line bigint, category text, flow_kind text, amount_minor bigint,
        currency text, fee_minor bigint, booked_at timestamptz, value_date date,
        gateway_ref text, idempotency_key text, biz_id text, booked boolean,
        v_ref text, result text, record_key text, rec_type text, rec_biz_id text, role text,
        detail text, slow boolean, flow_id bigint, is_dup boolean, decided boolean
    ) ON COMMIT DROP;
    TRUNCATE pg_temp.statement_new;
    INSERT INTO pg_temp.statement_new
    WITH b AS MATERIALIZED (
        -- (Its fields stay in statement_batch until the line is written: carried through every
        -- step they would cost more than all the rest.)
        SELECT row_number() OVER (ORDER BY b.source_line) AS ord, b.line_id, b.source_line,
               b.category, b.flow_kind, b.amount_minor, b.currency, b.fee_minor, b.booked_at,
               b.value_date, b.gateway_ref, b.idempotency_key, b.biz_id, b.booked,
               -- Without the gateway's reference, the line's own id, in the gateway's namespace.
               coalesce(b.gateway_ref, s.gateway || ':' || b.line_id) AS v_ref
          FROM pg_temp.statement_batch AS b
         WHERE NOT EXISTS (SELECT FROM pg_temp.statement_held AS h WHERE h.line_id = b.line_id)
    ), m AS (
        SELECT m.*
          FROM (SELECT array_agg(CASE WHEN b.booked THEN b.flow_kind END ORDER BY b.ord) AS kinds,
                       array_agg(b.amount_minor ORDER BY b.ord) AS amounts,
                       array_agg(b.currency ORDER BY b.ord) AS currencies,
                       array_agg(b.gateway_ref ORDER BY b.ord) AS refs,
                       array_agg(b.idempotency_key ORDER BY b.ord) AS keys,
                       array_agg(b.biz_id ORDER BY b.ord) AS biz_ids
                  FROM b) AS a,
               idem.match_gateway_lines(s.gateway, a.kinds, a.amounts, a.currencies, a.refs,
                                        a.keys, a.biz_ids) AS m
    ), j AS (
        SELECT b.*,
               CASE WHEN b.flow_kind IS NULL THEN 'not_a_flow' WHEN NOT b.booked THEN 'pending'
                    ELSE m.result END AS result,
               m.record_key, m.biz_type AS rec_type, m.biz_id AS rec_biz_id, m.role,
               CASE WHEN b.flow_kind IS NOT NULL AND b.booked THEN m.detail ELSE '' END AS detail
          FROM b JOIN m ON m.ord = b.ord
    )
    SELECT j.line_id, j.source_line, j.category, j.flow_kind, j.amount_minor, j.currency,
           j.fee_minor, j.booked_at, j.value_date, j.gateway_ref, j.idempotency_key, j.biz_id,
           j.booked, j.v_ref, j.result, j.record_key, j.rec_type, j.rec_biz_id, j.role,
           j.detail,
           (j.flow_kind IS NOT NULL AND j.booked
            AND count(*) FILTER (WHERE j.flow_kind IS NOT NULL AND j.booked)
                    OVER (PARTITION BY j.v_ref) > 1)
           OR (j.result = 'matched'
               AND count(*) FILTER (WHERE j.result = 'matched')
                       OVER (PARTITION BY j.rec_type, j.rec_biz_id, j.flow_kind) > 1)
           OR (j.result = 'matched' AND j.role = 'effect'
               AND count(*) FILTER (WHERE j.result = 'matched' AND j.role = 'effect')
                       OVER (PARTITION BY j.record_key) > 1),
           NULL, false, false
      FROM j;
    ANALYZE pg_temp.statement_new;

    -- Their flows, as idem.write_fund_flow writes one: the flow of the same reference if the
    -- ledger has it, else a new one, a duplicate of the business object's first of its kind.
    UPDATE pg_temp.statement_new AS n SET flow_id = e.id, is_dup = e.is_dup
      FROM (SELECT o.line_id, f.id, f.is_dup
              FROM pg_temp.statement_new AS o
             CROSS JOIN LATERAL (
                   SELECT f.id, f.duplicate_of IS NOT NULL AS is_dup FROM idem.fund_flows AS f
                    WHERE f.external_ref = o.v_ref LIMIT 1) AS f
             WHERE o.result = 'matched' AND NOT o.slow) AS e
     WHERE n.line_id = e.line_id;
    WITH written AS (
        INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, external_ref,
                                     idempotency_key, duplicate_of, recorded_by, recorded_login)
        SELECT n.rec_type, n.rec_biz_id, n.flow_kind, n.amount_minor, n.currency, n.v_ref,
               CASE WHEN n.role = 'effect' THEN n.record_key END,
               (SELECT f.id FROM idem.fund_flows AS f
                 WHERE f.biz_type = n.rec_type AND f.biz_id = n.rec_biz_id
                   AND f.kind = n.flow_kind AND f.duplicate_of IS NULL),
               'ledger', session_user
          FROM pg_temp.statement_new AS n
         WHERE n.result = 'matched' AND NOT n.slow AND n.flow_id IS NULL
         ORDER BY n.source_line
        ON CONFLICT DO NOTHING
        RETURNING id, external_ref, duplicate_of
    )
    UPDATE pg_temp.statement_new AS n SET flow_id = w.id, is_dup = w.duplicate_of IS NOT NULL
      FROM written AS w
     WHERE n.result = 'matched' AND NOT n.slow AND n.v_ref = w.external_ref;
    -- A flow a concurrent caller wrote meanwhile: that line goes the one-line way, which retries.
    UPDATE pg_temp.statement_new AS n SET slow = true
     WHERE n.result = 'matched' AND NOT n.slow AND n.flow_id IS NULL;

    -- A side effect of an UNKNOWN record, or of one PROCESSING past its lease, resolves it
    -- SUCCESS through idem.decide, the line as evidence (idem.apply_gateway_evidence's rule).
    FOR l IN
        SELECT n.*, x.version
          FROM pg_temp.statement_new AS n
         CROSS JOIN LATERAL (
               SELECT x.version FROM idem.records AS x
                WHERE x.idempotency_key = n.record_key
                  AND (x.status = 'UNKNOWN'
                       OR (x.status = 'PROCESSING' AND x.lease_expires_at < now()))
                LIMIT 1) AS x
         WHERE n.result = 'matched' AND NOT n.slow AND n.role = 'effect' AND NOT n.is_dup
         ORDER BY n.source_line
    LOOP
        SELECT d.result = 'ok' INTO v_ok
          FROM idem.decide('reconciler', l.record_key, l.version, 'SUCCESS',
                   format('statement: %s line %s of %s shows the %s (%s %s %s)', s.gateway,
                          l.line_id, s.file_name, l.rec_type, l.flow_kind, l.amount_minor,
                          l.currency),
                   jsonb_build_object('source', 'statement', 'gateway', s.gateway,
                                      'statement_id', s.id, 'file', s.file_name,
                                      'line_id', l.line_id, 'source_line', l.source_line,
                                      'gateway_ref', l.v_ref, 'kind', l.flow_kind,
                                      'amount_minor', l.amount_minor, 'currency', l.currency,
                                      'booked_at', l.booked_at, 'matched', l.detail)
                   || jsonb_build_object('flow_id', l.flow_id), false) AS d;
        IF v_ok THEN
            v_decided := v_decided || l.line_id;
        END IF;
    END LOOP;
    UPDATE pg_temp.statement_new AS n SET decided = true WHERE n.line_id = ANY (v_decided);

    -- The lines, each written once with what it was found to be (a line going the one-line way
    -- as unmatched, matched next). ON CONFLICT, not a plain insert in a block that catches the
    -- unique violation: such a block is a subtransaction, and a large file's dozens of them would
    -- overflow this backend's cache of subtransaction ids, slowing every snapshot on the server
    -- until the import ends.
    WITH added AS (
        INSERT INTO idem.statement_lines AS x (
            gateway, line_id, statement_id, source_line, category, flow_kind, amount_minor,
            currency, fee_minor, booked_at, value_date, gateway_ref, idempotency_key, biz_id,
            booked, fields, result, record_key, flow_id, detail)
        SELECT s.gateway, n.line_id, p_statement_id, n.source_line, n.category, n.flow_kind,
               n.amount_minor, n.currency, n.fee_minor, n.booked_at, n.value_date, n.gateway_ref,
               n.idempotency_key, n.biz_id, n.booked, b.fields,
               CASE WHEN n.slow THEN 'unmatched' WHEN n.is_dup THEN 'duplicate' ELSE n.result END,
               CASE WHEN NOT n.slow THEN n.record_key END,
               CASE WHEN NOT n.slow THEN n.flow_id END,
               CASE WHEN n.slow THEN ''
                    ELSE n.detail
                         || CASE WHEN n.is_dup THEN '; a second side effect for the business object'
                                 ELSE '' END
                         || CASE WHEN n.decided THEN '; resolved the record SUCCESS' ELSE '' END
               END
          FROM pg_temp.statement_new AS n
          JOIN pg_temp.statement_batch AS b ON b.line_id = n.line_id
         ORDER BY n.source_line
        ON CONFLICT (gateway, line_id) DO NOTHING
        RETURNING x.id
    )
    SELECT count(*) INTO v_new FROM added;
    IF v_new < (SELECT count(*) FROM pg_temp.statement_new) THEN
        SELECT n.source_line, n.line_id INTO l
          FROM pg_temp.statement_new AS n
         CROSS JOIN LATERAL (SELECT x.statement_id FROM idem.statement_lines AS x
                              WHERE x.gateway = s.gateway AND x.line_id = n.line_id LIMIT 1) AS x
         WHERE x.statement_id <> p_statement_id
         ORDER BY n.source_line LIMIT 1;
        RAISE EXCEPTION 'line %: line id % was imported meanwhile by a concurrent import of another file',
            l.source_line, quote_literal(l.line_id)
            USING ERRCODE = 'serialization_failure',
                  HINT = 'Nothing of this file was imported: import it again.';
    END IF;
    FOR l IN
        SELECT x.id FROM pg_temp.statement_new AS n
         CROSS JOIN LATERAL (SELECT x.id FROM idem.statement_lines AS x
                              WHERE x.gateway = s.gateway AND x.line_id = n.line_id LIMIT 1) AS x
         WHERE n.slow
         ORDER BY n.source_line
    LOOP
        PERFORM idem.match_statement_line(l.id);
    END LOOP;
    -- Lines booked since they were read as pending (or held unmatched from an earlier file).
    IF EXISTS (SELECT FROM pg_temp.statement_held) THEN
        FOR l IN EXECUTE format($sql$
            SELECT x.id FROM pg_temp.statement_held AS h
              JOIN idem.statement_lines AS x ON x.id = h.id
             WHERE x.statement_id <> %s
               AND x.result = 'unmatched' AND x.record_key IS NULL AND x.booked
             ORDER BY x.id $sql$, p_statement_id)
        LOOP
            PERFORM idem.match_statement_line(l.id);
        END LOOP;
        -- What each booking found, for the readers that count lines as they arrive.
        EXECUTE $sql$
            INSERT INTO idem.statement_line_bookings (line, gateway, result)
            SELECT x.id, x.gateway, x.result
              FROM pg_temp.statement_held AS h
              JOIN idem.statement_lines AS x ON x.id = h.id
             WHERE NOT h.booked AND h.new_booked AND h.flow_kind IS NOT NULL
            ON CONFLICT (line) DO NOTHING $sql$;
    END IF;
    RETURN v_new;
END
$function$;

COMMENT ON FUNCTION idem.add_statement_lines(bigint, jsonb) IS
    'The gateway''s word (idem_ledger): adds a batch of the open statement''s lines (a JSON array of objects: line_id, source_line, category, flow_kind, amount_minor, currency, fee_minor, booked_at, value_date, gateway_ref, idempotency_key, biz_id, booked, fields); each new one is matched (idem.match_gateway_lines, the batch at once) and, when matched, its flow recorded and its record resolved. A pending line a later file books is matched then, and what that found is appended to idem.statement_line_bookings. A line id repeated within the file, or held from another file with a different amount, currency or kind, stops the import (23505) naming the file''s line; a line id a concurrent import of another file added meanwhile stops it with 40001. Returns how many lines were new.';
