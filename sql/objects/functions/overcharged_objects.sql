CREATE OR REPLACE FUNCTION idem.overcharged_objects(p_biz_types text[], p_window interval)
 RETURNS TABLE(
    biz_type text,
    biz_id text,
    currency text,
    charges bigint,
    charged_minor bigint,
    refunded_minor bigint,
    owed_minor bigint,
    flow_ids bigint[],
    idempotency_keys text[],
    agent_ids text[],
    first_charge_at timestamp with time zone,
    last_flow_at timestamp with time zone)
 LANGUAGE plpgsql
 STABLE
 SET jit TO 'off'
 SET max_parallel_workers_per_gather TO '0'
AS $function$ BEGIN RETURN QUERY
    SELECT t.biz_type::text, t.biz_id::text, t.currency::text, t.charges::bigint,
           idem.minor_total(t.charged), idem.minor_total(t.refunded),
           idem.minor_total(t.beyond_first - t.refunded),
           t.flow_ids::bigint[], t.keys::text[],
           coalesce((SELECT array_agg(DISTINCT a.agent_id ORDER BY a.agent_id)
                       FROM idem.attempts a
                      WHERE a.idempotency_key = ANY(t.keys) AND a.agent_id IS NOT NULL), '{}'),
           t.first_at::timestamptz, t.last_at::timestamptz
      FROM (SELECT g.biz_type, g.biz_id, g.currency,
                   count(*) FILTER (WHERE g.charge) AS charges,
                   coalesce(sum(g.amount_minor) FILTER (WHERE g.charge), 0) AS charged,
                   coalesce(sum(g.amount_minor) FILTER (WHERE g.kind = 'REFUND'), 0) AS refunded,
                   coalesce(sum(g.amount_minor) FILTER (WHERE g.charge AND g.id <> g.first_id),
                            0) AS beyond_first,
                   array_agg(g.id ORDER BY g.id) FILTER (WHERE g.charge) AS flow_ids,
                   coalesce(array_agg(DISTINCT g.idempotency_key)
                                FILTER (WHERE g.charge AND g.idempotency_key IS NOT NULL),
                            '{}') AS keys,
                   min(g.first_at) AS first_at,
                   max(g.created_at) FILTER (WHERE g.charge OR g.kind = 'REFUND') AS last_at,
                   bool_or(g.latest_charge_at >= now() - p_window) AS charged_in_window
              FROM (SELECT f.biz_type::text AS biz_type, f.biz_id::text AS biz_id,
                           f.currency::text AS currency, f.kind::text AS kind, f.id,
                           f.amount_minor::numeric AS amount_minor,
                           f.idempotency_key::text AS idempotency_key, f.created_at,
                           f.kind IN ('DEBIT', 'CAPTURE') AS charge,
                           first_value(f.id) OVER o AS first_id,
                           first_value(f.created_at) OVER o AS first_at,
                           max(f.created_at) FILTER (WHERE f.kind IN ('DEBIT', 'CAPTURE'))
                               OVER (PARTITION BY f.biz_type, f.biz_id) AS latest_charge_at
                      FROM idem.charged_objects AS co
                      JOIN idem.fund_flows AS f
                        ON f.biz_type = co.biz_type AND f.biz_id = co.biz_id
                     WHERE co.charges > 1
                       AND co.last_charge_at >= now() - p_window
                       AND co.biz_type = ANY(p_biz_types)
                    WINDOW o AS (PARTITION BY f.biz_type, f.biz_id
                                 ORDER BY f.kind IN ('DEBIT', 'CAPTURE') DESC, f.id
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)) AS g
             GROUP BY g.biz_type, g.biz_id, g.currency) AS t
     WHERE t.beyond_first - t.refunded > 0
       AND t.charged_in_window;
END
$function$;

COMMENT ON FUNCTION idem.overcharged_objects(text[], interval) IS
    'One row per (business object, currency) charged within the window whose DEBIT+CAPTURE total exceeds its first charge plus its REFUNDs: what is still owed. Disappears once a REFUND covers the excess. The exporter''s idempotency_overcharged_* gauges, the admin app''s Overcharges tab.';
