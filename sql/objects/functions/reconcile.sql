-- Evidence the machine can read: a flow of one of the record's type's effect kinds under its own
-- key (and business object). Records being changed right now are skipped (SKIP LOCKED): a
-- concurrent complete, settle or reconcile is deciding them, and the row lock plus the version
-- condition below leave exactly one winner.

CREATE OR REPLACE FUNCTION idem.reconcile()
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    c       record;
    v_count integer := 0;
    v_ctx   text;
    v_n     integer;
    v_why   text;
BEGIN
    FOR c IN
        SELECT r.idempotency_key, r.version, r.biz_type, ev.flows
          FROM idem.records AS r
         CROSS JOIN LATERAL idem.business_type(r.biz_type) AS d
         CROSS JOIN LATERAL (
               SELECT jsonb_agg(jsonb_build_object('id', f.id, 'external_ref', f.external_ref,
                                                   'kind', f.kind, 'amount_minor', f.amount_minor,
                                                   'currency', f.currency,
                                                   'recorded_by', f.recorded_by) ORDER BY f.id) AS flows
                 FROM idem.fund_flows AS f
                WHERE f.biz_type = r.biz_type AND f.biz_id = r.biz_id
                  AND f.idempotency_key = r.idempotency_key
                  AND f.kind = ANY (d.effect_kinds)) AS ev
         WHERE (r.status = 'UNKNOWN' OR (r.status = 'PROCESSING' AND r.lease_expires_at < now()))
           AND ev.flows IS NOT NULL
         ORDER BY r.idempotency_key
           FOR UPDATE OF r SKIP LOCKED
    LOOP
        v_why := 'reconcile: the ledger records the ' || c.biz_type
                 || ' side effect under the record''s own key';
        v_ctx := idem.act('reconciler', v_why, jsonb_build_object('flows', c.flows)::text);
        UPDATE idem.records AS r
           SET status = 'SUCCESS',
               response_payload = coalesce(r.response_payload,
                   jsonb_build_object('resolved_by', session_user, 'reason', v_why,
                                      'evidence', jsonb_build_object('flows', c.flows)))
         WHERE r.idempotency_key = c.idempotency_key AND r.version = c.version
           AND (r.status = 'UNKNOWN' OR (r.status = 'PROCESSING' AND r.lease_expires_at < now()));
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_count := v_count + v_n;
    END LOOP;
    v_ctx := idem.act('', '', '');
    RETURN v_count;
END
$function$;

COMMENT ON FUNCTION idem.reconcile() IS
    'Resolves to SUCCESS (actor kind reconciler) every UNKNOWN record and every PROCESSING record past its lease that has a flow of one of its business type''s effect kinds (idem.business_types) naming its own idempotency_key and business object, recorded by the claimant or the gateway''s side; the evidence lists those flows. Returns how many. Never decides FAILED: the absence of a flow is not evidence. Safe to run concurrently (SKIP LOCKED) and against complete (one winner).';
