-- A statement's import ends: its counts are kept, and when the statement is final for its period
-- and the gateway takes absence as evidence, the UNKNOWN records its final statements now cover
-- are decided (idem.resolve_absent). Returns what this file's new lines were found to be.

CREATE OR REPLACE FUNCTION idem.close_statement(
    p_statement_id bigint,
    p_line_count bigint,
    p_period_from timestamptz,
    p_period_to timestamptz,
    p_final boolean,
    OUT new_lines bigint,
    OUT matched bigint,
    OUT mismatched bigint,
    OUT unmatched bigint,
    OUT duplicate bigint,
    OUT not_a_flow bigint,
    OUT pending bigint,
    OUT resolved_success bigint,
    OUT resolved_failed bigint)
 RETURNS record
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    s idem.statements;
BEGIN
    SELECT * INTO s FROM idem.statements AS x WHERE x.id = p_statement_id;
    IF NOT FOUND OR s.opened_in IS DISTINCT FROM txid_current() THEN
        RAISE EXCEPTION 'statement % is not being imported in this transaction', p_statement_id
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT count(*),
           count(*) FILTER (WHERE l.result = 'matched'),
           count(*) FILTER (WHERE l.result = 'mismatched'),
           count(*) FILTER (WHERE l.result = 'unmatched'),
           count(*) FILTER (WHERE l.result = 'duplicate'),
           count(*) FILTER (WHERE l.result = 'not_a_flow'),
           count(*) FILTER (WHERE l.result = 'pending'),
           count(*) FILTER (WHERE l.detail LIKE '%resolved the record SUCCESS')
      INTO new_lines, matched, mismatched, unmatched, duplicate, not_a_flow, pending,
           resolved_success
      FROM idem.statement_lines AS l WHERE l.statement_id = p_statement_id;
    IF (p_period_from IS NULL) <> (p_period_to IS NULL) THEN
        RAISE EXCEPTION 'a statement''s period has a beginning and an end, got % to %',
            coalesce(p_period_from::text, 'none'), coalesce(p_period_to::text, 'none')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_period_from >= p_period_to THEN
        RAISE EXCEPTION 'a statement''s period ends after it begins: % to %', p_period_from, p_period_to
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(p_final, false) AND p_period_from IS NULL THEN
        RAISE EXCEPTION 'a final statement names the period it is final for'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give the period (idemctl import-statement --period-from, --period-to), or import it as not final.';
    END IF;
    -- Without a declared period, a statement that is not final covers the span of its lines.
    UPDATE idem.statements AS x
       SET line_count = greatest(coalesce(p_line_count, 0), close_statement.new_lines),
           new_lines = close_statement.new_lines,
           period_from = coalesce(p_period_from, sp.first),
           period_to = coalesce(p_period_to, sp.last + interval '1 microsecond'),
           final = coalesce(p_final, false)
      FROM (SELECT min(l.booked_at) AS first, max(l.booked_at) AS last
              FROM idem.statement_lines AS l WHERE l.statement_id = p_statement_id) AS sp
     WHERE x.id = p_statement_id;
    resolved_failed := 0;
    IF coalesce(p_final, false) THEN
        resolved_failed := idem.resolve_absent(s.gateway);
    END IF;
END
$function$;

COMMENT ON FUNCTION idem.close_statement(bigint, bigint, timestamptz, timestamptz, boolean) IS
    'The gateway''s word (idem_ledger): ends the import of the open statement: keeps its line counts, its period [p_period_from, p_period_to) (without one, the span of its new lines) and whether it is final (a final statement needs a period), and for a final statement of a gateway that takes absence as evidence resolves FAILED the UNKNOWN records its final statements cover (idem.resolve_absent). Returns the new lines by result and how many records were resolved.';
