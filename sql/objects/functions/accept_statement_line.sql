-- A person's match: an operator who settles a record SUCCESS with an unmatched statement line as
-- its evidence, accepting it as the record's side effect (a proposal of the admin app: same
-- amount and currency, no reference), makes the line that side effect. The line's flow enters the
-- ledger under the record's business object, as a matched line's would, and the line is matched
-- to the record, so it leaves the lines a person must look at and the money questions see the
-- money that moved. Called by idem.settle in the settle's own transaction: a line that cannot be
-- the record's side effect refuses the settle whole.

CREATE OR REPLACE FUNCTION idem.accept_statement_line(
    p_key text,
    p_gateway text,
    p_line_id text,
    p_reason text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    l      idem.statement_lines;
    r      idem.records;
    w      record;
    v_role text;
    v_cur  text;
    v_amt  text;
BEGIN
    SELECT * INTO l FROM idem.statement_lines AS x
     WHERE x.gateway = p_gateway AND x.line_id = p_line_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the evidence accepts statement line % of gateway %, which no imported statement has',
            coalesce(quote_literal(p_line_id), 'NULL'), coalesce(quote_literal(p_gateway), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF l.result <> 'unmatched' OR NOT l.booked OR l.flow_kind IS NULL THEN
        RAISE EXCEPTION 'statement line % of gateway % is %: only an unmatched, booked side effect can be accepted as a record''s',
            quote_literal(p_line_id), p_gateway,
            CASE WHEN l.flow_kind IS NULL THEN 'not a side effect (a fee, a payout)'
                 WHEN NOT l.booked THEN 'not booked yet'
                 ELSE l.result || coalesce(' (to ' || l.record_key || ')', '') END
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Nothing was settled. Settle without accepting the line, or pick another line.';
    END IF;
    SELECT * INTO r FROM idem.records AS x WHERE x.idempotency_key = p_key;
    v_role := idem.side_effect_role(r.biz_type, l.flow_kind);
    v_cur := upper(r.request_payload ->> 'currency');
    v_amt := r.request_payload ->> 'amount_minor';
    -- What a proposal needs to be one, checked here whoever sends the evidence: a gateway that
    -- does not declare other business types only, no other business object named by the line,
    -- and the request's own amount and currency.
    IF EXISTS (SELECT FROM idem.gateways AS g
                WHERE g.gateway = l.gateway AND cardinality(g.biz_types) > 0
                  AND r.biz_type <> ALL (g.biz_types)) THEN
        RAISE EXCEPTION 'statement line % of gateway % cannot be the side effect of %: % is not declared to carry %',
            quote_literal(p_line_id), p_gateway, p_key, p_gateway, r.biz_type
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Nothing was settled (idemctl declare-gateway --biz-types).';
    END IF;
    IF v_role <> 'effect'
       OR (l.biz_id IS NOT NULL AND l.biz_id <> r.biz_id)
       OR v_cur IS NULL OR v_cur <> l.currency
       OR idem.request_amount_minor(r.request_payload) IS DISTINCT FROM l.amount_minor THEN
        RAISE EXCEPTION 'statement line % of gateway % (% % %) cannot be the side effect of % (% %, asking %)',
            quote_literal(p_line_id), p_gateway, l.flow_kind, l.amount_minor, l.currency,
            p_key, r.biz_type, r.biz_id,
            coalesce(v_amt || ' ' || v_cur, 'no amount and currency')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Nothing was settled: the kind must be the business type''s side effect, the line may name no other business object, and amount and currency must be those of the request.';
    END IF;
    SELECT * INTO w
      FROM idem.write_fund_flow(r.biz_type, r.biz_id, l.flow_kind, l.amount_minor, l.currency,
                                coalesce(l.gateway_ref, l.gateway || ':' || l.line_id),
                                r.idempotency_key, 'ledger');
    IF w.already_recorded AND NOT EXISTS (
           SELECT FROM idem.fund_flows AS f
            WHERE f.id = w.flow_id AND f.biz_type = r.biz_type AND f.biz_id = r.biz_id
              AND f.kind = l.flow_kind AND f.amount_minor = l.amount_minor
              AND f.currency = l.currency) THEN
        RAISE EXCEPTION 'statement line % of gateway %: the ledger records its reference % for something else',
            quote_literal(p_line_id), p_gateway, coalesce(l.gateway_ref, l.gateway || ':' || l.line_id)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Nothing was settled.';
    END IF;
    UPDATE idem.statement_lines AS x
       SET result = CASE WHEN w.is_duplicate THEN 'duplicate' ELSE 'matched' END,
           record_key = p_key, flow_id = w.flow_id, matched_at = now(),
           detail = format('accepted by %s as the side effect of %s: %s', session_user, p_key,
                           p_reason)
                    || CASE WHEN w.is_duplicate
                            THEN '; a second side effect for the business object' ELSE '' END
     WHERE x.id = l.id;
END
$function$;

COMMENT ON FUNCTION idem.accept_statement_line(text, text, text, text) IS
    'Internal (idem.settle): makes an unmatched, booked statement line the side effect of the record an operator settles SUCCESS with it as evidence ("accepted_proposal": true): records its flow under the record (recorded_by ledger) and matches the line to it; raises 22023, so that nothing is settled, when the line is not unmatched, not booked, not a side effect, or its kind, amount or currency cannot be the record''s.';
