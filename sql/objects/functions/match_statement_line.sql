-- One stored statement line, matched and applied, its result kept on the line.

CREATE OR REPLACE FUNCTION idem.match_statement_line(p_line_id bigint)
 RETURNS text
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    l   idem.statement_lines;
    s   idem.statements;
    m   record;
    a   record;
    v_ref text;
BEGIN
    SELECT * INTO l FROM idem.statement_lines AS x WHERE x.id = p_line_id;
    SELECT * INTO s FROM idem.statements AS x WHERE x.id = l.statement_id;
    SELECT * INTO m
      FROM idem.match_gateway_line(l.gateway, l.flow_kind, l.amount_minor, l.currency,
                                   l.gateway_ref, l.idempotency_key, l.biz_id);
    IF m.result = 'matched' THEN
        v_ref := coalesce(l.gateway_ref, l.gateway || ':' || l.line_id);
        SELECT * INTO a
          FROM idem.apply_gateway_evidence(
                   m.record_key, m.biz_type, m.biz_id, m.role, l.flow_kind, l.amount_minor,
                   l.currency, v_ref,
                   format('statement: %s line %s of %s shows the %s (%s %s %s)', l.gateway,
                          l.line_id, s.file_name, m.biz_type, l.flow_kind, l.amount_minor,
                          l.currency),
                   jsonb_build_object('source', 'statement', 'gateway', l.gateway,
                                      'statement_id', s.id, 'file', s.file_name,
                                      'line_id', l.line_id, 'source_line', l.source_line,
                                      'gateway_ref', v_ref, 'kind', l.flow_kind,
                                      'amount_minor', l.amount_minor, 'currency', l.currency,
                                      'booked_at', l.booked_at, 'matched', m.detail));
        UPDATE idem.statement_lines AS x
           SET result = a.result, record_key = m.record_key, flow_id = a.flow_id,
               detail = m.detail || CASE WHEN a.result = 'duplicate'
                                         THEN '; a second side effect for the business object'
                                         ELSE '' END
                             || CASE WHEN a.decided IS NOT NULL
                                     THEN '; resolved the record ' || a.decided ELSE '' END,
               matched_at = now()
         WHERE x.id = p_line_id;
        RETURN a.result;
    END IF;
    UPDATE idem.statement_lines AS x
       SET result = m.result, record_key = m.record_key, detail = m.detail, matched_at = now()
     WHERE x.id = p_line_id;
    RETURN m.result;
END
$function$;

COMMENT ON FUNCTION idem.match_statement_line(bigint) IS
    'Internal: matches one stored statement line (idem.match_gateway_line), applies it when matched (idem.apply_gateway_evidence) and keeps the result, the record and the flow on the line.';
