-- SUCCESS records whose business object shows no money moved. Set aside: the records whose object
-- has a DEBIT or CAPTURE flow created since an hour before the window (the BRIN on created_at, one
-- hash). The window's records are read by records_by_updated alone, behind an OFFSET 0: with the
-- biz types next to them the planner would AND that index with records_one_live_per_biz's whole run
-- of the biz type (a million pages).

CREATE OR REPLACE FUNCTION idem.success_without_money_moved(
    p_biz_types text[],
    p_window interval,
    p_grace interval)
 RETURNS TABLE(
    biz_type text,
    biz_id text,
    idempotency_key text,
    version integer,
    succeeded_at timestamp with time zone,
    agent_id text)
 LANGUAGE plpgsql
 STABLE
 SET jit TO 'off'
 SET max_parallel_workers_per_gather TO '0'
AS $function$ BEGIN RETURN QUERY
    SELECT u.biz_type::text, u.biz_id::text, u.idempotency_key::text, u.version::integer,
           u.updated_at::timestamptz, a.agent_id::text
      FROM (SELECT w.*
              FROM (SELECT x.biz_type, x.biz_id, x.idempotency_key, x.version, x.updated_at
                      FROM idem.records AS x
                     WHERE x.updated_at >= now() - p_window
                       AND x.updated_at < now() - p_grace
                       AND x.status = 'SUCCESS'
                    OFFSET 0) AS w
              LEFT JOIN (SELECT f.biz_type, f.biz_id
                           FROM idem.fund_flows AS f
                          WHERE f.created_at >= now() - p_window - interval '1 hour'
                            AND f.kind IN ('DEBIT', 'CAPTURE')) AS charged
                     ON charged.biz_type = w.biz_type AND charged.biz_id = w.biz_id
             WHERE charged.biz_id IS NULL
               AND w.biz_type = ANY(p_biz_types)
            OFFSET 0) AS u
      LEFT JOIN LATERAL (SELECT a.agent_id
                           FROM idem.attempts a
                          WHERE a.idempotency_key = u.idempotency_key
                          ORDER BY a.id
                          LIMIT 1) AS a ON true
     WHERE NOT EXISTS (SELECT FROM idem.fund_flows f
                        WHERE f.biz_type = u.biz_type AND f.biz_id = u.biz_id
                          AND f.kind IN ('DEBIT', 'CAPTURE')
                       OFFSET 0);
END
$function$;

COMMENT ON FUNCTION idem.success_without_money_moved(text[], interval, interval) IS
    'SUCCESS records of the given biz types updated in [now()-window, now()-grace) whose business object has no DEBIT or CAPTURE flow. The exporter''s success_without_debit mismatches, the admin app''s Reconciliation tab.';
