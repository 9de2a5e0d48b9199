-- A batch of a statement's lines (a JSON array of objects, as idemctl import-statement reads
-- them). A line id already held (from an earlier file) is the same line: nothing changes, unless
-- its amount, currency or kind differ, which stops the whole import (a gateway that changed a
-- line it already reported is a person's question). The same line id twice in one file stops it
-- too. Each new charge or refund line is matched and applied at once.

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
BEGIN
    SELECT * INTO s FROM idem.statements AS x WHERE x.id = p_statement_id;
    IF NOT FOUND OR current_setting('idem.open_statement', true) IS DISTINCT FROM p_statement_id::text THEN
        RAISE EXCEPTION 'statement % is not being imported in this transaction', p_statement_id
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Open it with idem.open_statement first, in the same transaction.';
    END IF;
    IF p_lines IS NULL OR jsonb_typeof(p_lines) <> 'array' THEN
        RAISE EXCEPTION 'statement lines come as a JSON array of objects, got %',
            coalesce(jsonb_typeof(p_lines), 'NULL') USING ERRCODE = 'invalid_parameter_value';
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
    SELECT b.source_line, b.line_id, x.statement_id, x.source_line AS held_line,
           x.amount_minor, x.currency, x.flow_kind,
           b.amount_minor AS new_amount, b.currency AS new_currency, b.flow_kind AS new_kind INTO l
      FROM pg_temp.statement_batch AS b
      JOIN idem.statement_lines AS x ON x.gateway = s.gateway AND x.line_id = b.line_id
     WHERE x.statement_id = p_statement_id
        OR x.amount_minor <> b.amount_minor OR x.currency <> b.currency
        OR x.flow_kind IS DISTINCT FROM b.flow_kind
     ORDER BY b.source_line LIMIT 1;
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
    UPDATE idem.statement_lines AS x
       SET booked = true, result = 'unmatched', matched_at = now()
      FROM pg_temp.statement_batch AS b
     WHERE x.gateway = s.gateway AND x.line_id = b.line_id AND NOT x.booked AND b.booked
       AND x.flow_kind IS NOT NULL;

    FOR l IN
        INSERT INTO idem.statement_lines AS x (
            gateway, line_id, statement_id, source_line, category, flow_kind, amount_minor,
            currency, fee_minor, booked_at, value_date, gateway_ref, idempotency_key, biz_id,
            booked, fields, result)
        SELECT s.gateway, b.line_id, p_statement_id, b.source_line, b.category, b.flow_kind,
               b.amount_minor, b.currency, b.fee_minor, b.booked_at, b.value_date, b.gateway_ref,
               b.idempotency_key, b.biz_id, b.booked, b.fields,
               CASE WHEN b.flow_kind IS NULL THEN 'not_a_flow'
                    WHEN NOT b.booked THEN 'pending' ELSE 'unmatched' END
          FROM pg_temp.statement_batch AS b
         ORDER BY b.source_line
        ON CONFLICT (gateway, line_id) DO NOTHING
        RETURNING x.id, x.line_id, x.source_line, x.flow_kind, x.amount_minor, x.currency,
                  x.gateway_ref, x.idempotency_key, x.biz_id, x.booked, x.result
    LOOP
        v_new := v_new + 1;
        CONTINUE WHEN l.result <> 'unmatched';
        PERFORM idem.match_statement_line(l.id);
    END LOOP;
    -- Lines booked since they were read as pending.
    FOR l IN
        SELECT x.id FROM idem.statement_lines AS x
          JOIN pg_temp.statement_batch AS b ON b.line_id = x.line_id
         WHERE x.gateway = s.gateway AND x.statement_id <> p_statement_id
           AND x.result = 'unmatched' AND x.record_key IS NULL AND x.booked
    LOOP
        PERFORM idem.match_statement_line(l.id);
    END LOOP;
    RETURN v_new;
END
$function$;

COMMENT ON FUNCTION idem.add_statement_lines(bigint, jsonb) IS
    'The gateway''s word (idem_ledger): adds a batch of the open statement''s lines (a JSON array of objects: line_id, source_line, category, flow_kind, amount_minor, currency, fee_minor, booked_at, value_date, gateway_ref, idempotency_key, biz_id, booked, fields); each new one is matched (idem.match_gateway_line) and, when matched, its flow recorded and its record resolved. A line id repeated within the file, or held from another file with a different amount, currency or kind, stops the import (23505) naming the file''s line. Returns how many lines were new.';
