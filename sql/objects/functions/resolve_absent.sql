-- The one place where absence is evidence. A gateway that takes it (absence_is_evidence, off
-- until its owner enables it) reports every side effect of its business types on its statements
-- within settlement_delay; once its final statements cover the whole time from a record's
-- creation to that delay after it, an UNKNOWN record with no line for its key, its reference or
-- its business object did not happen there. Never when money moved for the business object by
-- any other route (any flow of it, any gateway's line, callback or lookup answer about it), nor
-- while money this gateway moved that no record explains (an unmatched or mismatched line or
-- event of the request's amount and currency) could be it: then a person decides. Records being
-- changed right now are skipped.

CREATE OR REPLACE FUNCTION idem.resolve_absent(p_gateway text)
 RETURNS integer
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    g       idem.gateways;
    c       record;
    d       record;
    v_cover tstzmultirange;
    v_ids   bigint[];
    v_count integer := 0;
BEGIN
    SELECT * INTO g FROM idem.gateways AS x WHERE x.gateway = p_gateway;
    IF NOT FOUND OR NOT g.absence_is_evidence THEN
        RETURN 0;
    END IF;
    SELECT range_agg(tstzrange(s.period_from, s.period_to)), array_agg(s.id ORDER BY s.id)
      INTO v_cover, v_ids
      FROM idem.statements AS s WHERE s.gateway = p_gateway AND s.final;
    IF v_cover IS NULL THEN
        RETURN 0;
    END IF;
    FOR c IN
        SELECT r.idempotency_key, r.version, r.biz_type, r.biz_id, r.created_at
          FROM idem.records AS r
         WHERE r.status = 'UNKNOWN' AND r.biz_type = ANY (g.biz_types)
           AND r.created_at + g.settlement_delay <= now()
           AND v_cover @> tstzrange(r.created_at, r.created_at + g.settlement_delay, '[]')
           -- Nothing any gateway said names it or its business object...
           AND NOT EXISTS (SELECT FROM idem.statement_lines AS l
                            WHERE l.idempotency_key = r.idempotency_key
                               OR l.record_key = r.idempotency_key OR l.biz_id = r.biz_id)
           AND NOT EXISTS (SELECT FROM idem.gateway_events AS e
                            WHERE e.record_key = r.idempotency_key
                               OR e.idempotency_key = r.idempotency_key OR e.biz_id = r.biz_id)
           -- ...no money moved for the object by any route...
           AND NOT EXISTS (SELECT FROM idem.fund_flows AS f
                            WHERE f.biz_type = r.biz_type AND f.biz_id = r.biz_id)
           -- ...and no money this gateway moved that nothing explains could be it: a line or an
           -- event it left unmatched or mismatched, of the request's currency and amount (any,
           -- when the request names none or no whole number of minor units; 2990.0 is 2990),
           -- around the time the record could have been charged.
           AND NOT EXISTS (
                 SELECT FROM idem.statement_lines AS l
                  WHERE l.gateway = p_gateway AND l.flow_kind IS NOT NULL
                    AND l.result IN ('unmatched', 'mismatched')
                    AND (r.request_payload ->> 'currency' IS NULL
                         OR l.currency = upper(r.request_payload ->> 'currency'))
                    AND (idem.request_amount_minor(r.request_payload) IS NULL
                         OR l.amount_minor = idem.request_amount_minor(r.request_payload))
                    AND (l.booked_at IS NULL
                         OR l.booked_at BETWEEN r.created_at - interval '1 day'
                                            AND r.created_at + g.settlement_delay + interval '1 day'))
           AND NOT EXISTS (
                 SELECT FROM idem.gateway_events AS e
                  WHERE e.gateway = p_gateway AND e.flow_kind IS NOT NULL
                    AND e.result IN ('unmatched', 'mismatched')
                    AND (r.request_payload ->> 'currency' IS NULL
                         OR e.currency = upper(r.request_payload ->> 'currency'))
                    AND (idem.request_amount_minor(r.request_payload) IS NULL
                         OR e.amount_minor = idem.request_amount_minor(r.request_payload)))
         ORDER BY r.idempotency_key
           FOR UPDATE OF r SKIP LOCKED
    LOOP
        SELECT * INTO d
          FROM idem.decide('reconciler', c.idempotency_key, c.version, 'FAILED',
                           format('statement: %s''s final statements for %s hold no line for it, %s after it began',
                                  p_gateway, v_cover::text, g.settlement_delay),
                           jsonb_build_object('source', 'statement_absence', 'gateway', p_gateway,
                                              'final_statements', to_jsonb(v_ids),
                                              'periods', v_cover::text,
                                              'settlement_delay', g.settlement_delay::text,
                                              'record_created_at', c.created_at),
                           false);
        IF d.result = 'ok' THEN
            v_count := v_count + 1;
        END IF;
    END LOOP;
    RETURN v_count;
END
$function$;

COMMENT ON FUNCTION idem.resolve_absent(text) IS
    'Internal: for a gateway with absence_is_evidence, resolves FAILED (actor kind reconciler) each UNKNOWN record of its business types whose creation and settlement delay its final statements cover, with no statement line for its key, reference or business object, no flow of its business object and no callback or lookup answer about it. Returns how many.';
