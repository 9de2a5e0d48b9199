-- Which record each of a set of gateway lines or events is: idem.match_gateway_line's rule, for
-- many lines in one statement (a statement's batch of thousands is matched by a few index joins,
-- not a call and four queries a line). idem.match_gateway_line is this function for one line, so
-- the rule is written once: the idempotency key the client put in the gateway's metadata; else the
-- gateway reference of a flow the ledger already has; else the business object, among the
-- gateway's business types, when exactly one record has it. Amount and currency must agree with
-- the record's request (when it carries them) and with a flow of the same reference, or the line
-- is a mismatch: never a match. The arrays are the lines' columns, the same length; ord is the
-- line's position in them (1-based).

CREATE OR REPLACE FUNCTION idem.match_gateway_lines(
    p_gateway text,
    p_kind text[],
    p_amount_minor bigint[],
    p_currency text[],
    p_gateway_ref text[],
    p_key text[],
    p_biz_id text[])
 RETURNS TABLE (ord bigint, result text, record_key text, biz_type text, biz_id text, role text,
                detail text)
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    WITH l AS (
        SELECT u.ord, u.kind, u.amount_minor, u.currency, u.gateway_ref, u.key, u.biz_id
          FROM unnest(p_kind, p_amount_minor, p_currency, p_gateway_ref, p_key, p_biz_id)
               WITH ORDINALITY AS u(kind, amount_minor, currency, gateway_ref, key, biz_id, ord)
    ), types AS (
        SELECT coalesce((SELECT g.biz_types FROM idem.gateways AS g WHERE g.gateway = p_gateway),
                        '{}') AS biz_types
    ), found AS (
        SELECT l.*,
               coalesce(rk.idempotency_key, rr.idempotency_key, rb.idempotency_key) AS r_key,
               coalesce(rk.biz_type, rr.biz_type, rb.biz_type) AS r_type,
               coalesce(rk.biz_id, rr.biz_id, rb.biz_id) AS r_biz_id,
               coalesce(rk.request_payload, rr.request_payload, rb.request_payload) AS r_request,
               CASE WHEN rk.idempotency_key IS NOT NULL THEN 'its idempotency key'
                    WHEN rr.idempotency_key IS NOT NULL THEN 'the gateway reference of a recorded flow'
                    WHEN rb.idempotency_key IS NOT NULL THEN 'its business object' END AS by,
               nb.n AS biz_records
          FROM l
          CROSS JOIN types
          -- Each lookup an index probe a line (LATERAL ... LIMIT 1 on a unique key), never a hash
          -- join's scan of the whole table, which a batch of a few thousand lines would cost.
          LEFT JOIN LATERAL (
              SELECT x.idempotency_key, x.biz_type, x.biz_id, x.request_payload
                FROM idem.records AS x
               WHERE l.kind IS NOT NULL AND x.idempotency_key = l.key
               LIMIT 1) AS rk ON true
          LEFT JOIN LATERAL (
              SELECT x.idempotency_key, x.biz_type, x.biz_id, x.request_payload
                FROM idem.fund_flows AS fl
                JOIN idem.records AS x ON x.idempotency_key = fl.idempotency_key
               WHERE l.kind IS NOT NULL AND rk.idempotency_key IS NULL
                 AND fl.external_ref = l.gateway_ref
               LIMIT 1) AS rr ON true
          LEFT JOIN LATERAL (
              SELECT count(*) AS n, min(x.idempotency_key) AS key
                FROM idem.records AS x
               WHERE l.kind IS NOT NULL AND rk.idempotency_key IS NULL
                 AND rr.idempotency_key IS NULL
                 -- Equality is the same in every deterministic collation: "C" is the one the
                 -- index on biz_id (records_biz_id_prefix) is in.
                 AND x.biz_id COLLATE "C" = l.biz_id AND x.biz_type = ANY (types.biz_types)
                 AND idem.side_effect_role(x.biz_type, l.kind) <> 'none') AS nb ON true
          LEFT JOIN LATERAL (
              SELECT x.idempotency_key, x.biz_type, x.biz_id, x.request_payload
                FROM idem.records AS x
               WHERE nb.n = 1 AND x.idempotency_key = nb.key
               LIMIT 1) AS rb ON true
    ), roles AS (
        -- The role of each kind for each business type met: a call per pair, not per line.
        SELECT p.r_type, p.kind, idem.side_effect_role(p.r_type, p.kind) AS r_role
          FROM (SELECT DISTINCT f.r_type, f.kind FROM found AS f WHERE f.r_key IS NOT NULL) AS p
    ), judged AS (
        SELECT f.*, ro.r_role,
               upper(f.r_request ->> 'currency') AS req_cur,
               f.r_request ->> 'amount_minor' AS req_amt,
               -- An amount_minor the request carries that is not a whole number of minor units
               -- cannot agree with a line.
               idem.request_amount_minor(f.r_request) AS req_amount,
               (f.r_request ? 'amount_minor') AS req_has_amount,
               fl.amount_minor AS f_amount, fl.currency AS f_currency, fl.kind AS f_kind,
               fl.biz_type AS f_type, fl.biz_id AS f_biz_id, fl.id IS NOT NULL AS f_found
          FROM found AS f
          LEFT JOIN roles AS ro ON ro.r_type = f.r_type AND ro.kind = f.kind
          LEFT JOIN LATERAL (
              SELECT x.id, x.amount_minor, x.currency, x.kind, x.biz_type, x.biz_id
                FROM idem.fund_flows AS x
               WHERE f.r_key IS NOT NULL AND f.gateway_ref IS NOT NULL
                 AND x.external_ref = f.gateway_ref
               LIMIT 1) AS fl ON true
    )
    SELECT j.ord,
           CASE WHEN j.kind IS NULL THEN 'not_a_flow'
                WHEN j.r_key IS NULL THEN 'unmatched'
                WHEN j.r_role = 'none'
                  OR (j.biz_id IS NOT NULL AND j.biz_id <> j.r_biz_id)
                  OR (j.req_cur IS NOT NULL AND j.req_cur <> j.currency)
                  OR (j.r_role = 'effect' AND j.req_has_amount AND j.req_amount IS NULL)
                  OR (j.r_role = 'effect' AND j.req_amount <> j.amount_minor)
                  OR (j.f_found AND (j.f_type <> j.r_type OR j.f_biz_id <> j.r_biz_id))
                  OR (j.f_found AND (j.f_amount <> j.amount_minor OR j.f_currency <> j.currency
                                     OR j.f_kind <> j.kind))
                     THEN 'mismatched'
                ELSE 'matched' END,
           j.r_key, j.r_type, j.r_biz_id,
           CASE WHEN j.r_key IS NOT NULL THEN j.r_role END,
           CASE WHEN j.kind IS NULL
                    THEN 'not a business object''s side effect (a fee, a payout, a transfer)'
                WHEN j.r_key IS NULL AND j.biz_records > 1
                    THEN format('%s records of business object %s could be it: a person decides which',
                                j.biz_records, j.biz_id)
                WHEN j.r_key IS NULL
                    THEN 'no record has its idempotency key, its gateway reference or its business object'
                WHEN j.r_role = 'none'
                    THEN format('matched by %s, but a %s is neither a %s''s side effect nor its reversal',
                                j.by, j.kind, j.r_type)
                WHEN j.biz_id IS NOT NULL AND j.biz_id <> j.r_biz_id
                    THEN format('matched by %s (%s %s), but the gateway names business object %s',
                                j.by, j.r_type, j.r_biz_id, j.biz_id)
                WHEN j.req_cur IS NOT NULL AND j.req_cur <> j.currency
                    THEN format('matched by %s, but the gateway moved %s %s and the request was in %s',
                                j.by, j.amount_minor, j.currency, j.req_cur)
                WHEN j.r_role = 'effect' AND j.req_has_amount AND j.req_amount IS NULL
                    THEN format('matched by %s, but the request''s amount_minor %s is not a whole number of minor units',
                                j.by, j.req_amt)
                -- A reversal may give back part of the charge: only its currency must agree.
                WHEN j.r_role = 'effect' AND j.req_amount <> j.amount_minor
                    THEN format('matched by %s, but the gateway moved %s %s and the request asked %s %s',
                                j.by, j.amount_minor, j.currency, j.req_amt,
                                upper(coalesce(j.req_cur, j.currency)))
                WHEN j.f_found AND (j.f_type <> j.r_type OR j.f_biz_id <> j.r_biz_id)
                    THEN format('matched by %s (%s %s), but the ledger records %s for %s %s',
                                j.by, j.r_type, j.r_biz_id, j.gateway_ref, j.f_type, j.f_biz_id)
                WHEN j.f_found AND (j.f_amount <> j.amount_minor OR j.f_currency <> j.currency
                                    OR j.f_kind <> j.kind)
                    THEN format('matched by %s, but the ledger records %s as %s %s %s and the gateway says %s %s %s',
                                j.by, j.gateway_ref, j.f_kind, j.f_amount, j.f_currency,
                                j.kind, j.amount_minor, j.currency)
                ELSE 'matched by ' || j.by END
      FROM judged AS j
$function$;

COMMENT ON FUNCTION idem.match_gateway_lines(text, text[], bigint[], text[], text[], text[], text[]) IS
    'Internal: idem.match_gateway_line for many lines at once (the arrays are their columns; ord their 1-based position): the record each is (by idempotency key, else the gateway reference of a recorded flow, else the business object among the gateway''s business types when exactly one record has it), and whether amount, currency and kind agree.';
