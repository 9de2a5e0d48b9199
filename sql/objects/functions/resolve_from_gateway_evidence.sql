-- The reconciler's pass over the gateway's evidence already stored: a line or event matched to a
-- record that was still PROCESSING with a live lease when it arrived decides it once the lease
-- has ended; and each gateway that takes absence as evidence decides what its final statements
-- now cover (the settlement delay passes after the import).

CREATE OR REPLACE FUNCTION idem.resolve_from_gateway_evidence(
    OUT resolved_success integer,
    OUT resolved_failed integer)
 RETURNS record
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    c record;
    d record;
BEGIN
    resolved_success := 0; resolved_failed := 0;
    FOR c IN
        SELECT r.idempotency_key, r.version, ev.source, ev.gateway, ev.ref, ev.flow_id, ev.detail
          FROM idem.records AS r
          -- One piece of evidence that is the record's own side effect (a matched reversal line,
          -- a refund of it, is evidence of nothing here).
          CROSS JOIN LATERAL (
                SELECT 'statement' AS source, l.gateway, l.line_id AS ref, l.flow_id, l.detail
                  FROM idem.statement_lines AS l
                  JOIN idem.fund_flows AS f ON f.id = l.flow_id
                 WHERE l.record_key = r.idempotency_key AND l.result = 'matched'
                   AND idem.side_effect_role(r.biz_type, f.kind) = 'effect'
                UNION ALL
                SELECT e.source, e.gateway, e.event_id, e.flow_id, e.detail
                  FROM idem.gateway_events AS e
                  JOIN idem.fund_flows AS f ON f.id = e.flow_id
                 WHERE e.record_key = r.idempotency_key AND e.result = 'matched'
                   AND idem.side_effect_role(r.biz_type, f.kind) = 'effect'
                 LIMIT 1) AS ev
         WHERE (r.status = 'UNKNOWN' OR (r.status = 'PROCESSING' AND r.lease_expires_at < now()))
         ORDER BY r.idempotency_key
           FOR UPDATE OF r SKIP LOCKED
    LOOP
        SELECT * INTO d
          FROM idem.decide('reconciler', c.idempotency_key, c.version, 'SUCCESS',
                           format('%s: %s %s shows the side effect', c.source, c.gateway, c.ref),
                           jsonb_build_object('source', c.source, 'gateway', c.gateway,
                                              'ref', c.ref, 'flow_id', c.flow_id,
                                              'matched', c.detail),
                           false);
        IF d.result = 'ok' THEN resolved_success := resolved_success + 1; END IF;
    END LOOP;
    SELECT coalesce(sum(idem.resolve_absent(g.gateway)), 0) INTO resolved_failed
      FROM idem.gateways AS g WHERE g.absence_is_evidence;
END
$function$;

COMMENT ON FUNCTION idem.resolve_from_gateway_evidence() IS
    'The reconciler''s pass (idem_reconciler, idem_ledger): resolves SUCCESS each UNKNOWN record, or PROCESSING past its lease, that a stored statement line or gateway event matched with its side effect, and resolves FAILED what the final statements of gateways that take absence as evidence now cover (idem.resolve_absent). Returns how many of each.';
