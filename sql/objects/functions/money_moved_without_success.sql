CREATE OR REPLACE FUNCTION idem.money_moved_without_success(
    p_biz_types text[],
    p_window interval,
    p_grace interval)
 RETURNS TABLE(
    biz_type text,
    biz_id text,
    first_charge_id bigint,
    first_charge_at timestamp with time zone,
    first_charge_ref text,
    charges bigint,
    charged_minor bigint,
    currency text,
    record_key text,
    record_status text,
    record_version integer,
    record_lease_expires_at timestamp with time zone)
 LANGUAGE plpgsql
 STABLE
 SET jit TO 'off'
 SET max_parallel_workers_per_gather TO '0'
AS $function$ BEGIN RETURN QUERY
    SELECT u.biz_type::text, u.biz_id::text, c.id::bigint, c.created_at::timestamptz,
           c.ref::text, c.charges::bigint, idem.minor_total(c.total), c.currency::text, r.key::text,
           r.status::text, r.version::integer, r.lease_expires_at::timestamptz
      FROM (SELECT DISTINCT w.biz_type, w.biz_id
              FROM (SELECT f.biz_type::text AS biz_type, f.biz_id::text AS biz_id
                      FROM idem.fund_flows AS f
                     WHERE f.kind IN ('DEBIT', 'CAPTURE')
                       AND f.biz_type = ANY(p_biz_types)
                       AND f.created_at >= now() - p_window
                       AND f.created_at < now() - p_grace) AS w
              LEFT JOIN (SELECT p.biz_type::text AS biz_type, p.biz_id::text AS biz_id
                           FROM idem.records AS p
                          WHERE p.updated_at >= now() - p_window - interval '1 hour'
                            AND p.status = 'SUCCESS') AS paid
                     ON paid.biz_type = w.biz_type AND paid.biz_id = w.biz_id
             WHERE paid.biz_id IS NULL
            OFFSET 0) AS u
     -- Its first charge by id, with the count of its charges and their total in that one's
     -- currency (window aggregates run before the LIMIT), and its most recently updated record.
     CROSS JOIN LATERAL (SELECT f.id, f.created_at, f.external_ref::text AS ref,
                                f.currency::text AS currency, count(*) OVER () AS charges,
                                sum(f.amount_minor::numeric) OVER (PARTITION BY f.currency) AS total
                           FROM idem.fund_flows AS f
                          WHERE f.kind IN ('DEBIT', 'CAPTURE')
                            AND f.biz_type = u.biz_type AND f.biz_id = u.biz_id
                          ORDER BY f.id
                          LIMIT 1) AS c
      LEFT JOIN LATERAL (SELECT l.idempotency_key::text AS key, l.status::text AS status, l.version,
                                l.lease_expires_at
                           FROM idem.records AS l
                          WHERE l.biz_type = u.biz_type AND (l.biz_id COLLATE "C") = u.biz_id
                          ORDER BY l.updated_at DESC, l.idempotency_key DESC
                          LIMIT 1) AS r ON true
     -- Two probes kept as subplans by their OFFSET 0 (see 012): a SUCCESS record, a SUCCESS tombstone.
     WHERE NOT EXISTS (SELECT FROM idem.records AS x
                        WHERE x.status = 'SUCCESS' AND x.biz_type = u.biz_type
                          AND x.biz_id = u.biz_id OFFSET 0)
       AND NOT EXISTS (SELECT FROM idem.retired_keys AS t
                        WHERE t.status = 'SUCCESS' AND t.biz_type = u.biz_type
                          AND t.biz_id = u.biz_id OFFSET 0);
END
$function$;

COMMENT ON FUNCTION idem.money_moved_without_success(text[], interval, interval) IS
    'Business objects of the given biz types with a DEBIT or CAPTURE flow created in [now()-window, now()-grace) and no SUCCESS record nor SUCCESS tombstone (idem.retired_keys). The exporter''s debit_without_success mismatches, the admin app''s Reconciliation tab.';
