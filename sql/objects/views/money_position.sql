-- Money moved for a business object (docs/contract/schema.md, "Money moved"), written down once:
-- settle, resolve and begin read this view, and so do the C++ settle path, the admin app and
-- operators (SELECT money_moved FROM idem.money_position WHERE biz_type = $1 AND biz_id = $2; no
-- row: no flows, nothing moved).
--   * DEBIT and CAPTURE charge, REFUND gives back: money moved when the charges exceed the refunds.
--   * CREDIT is money to the customer that is not a refund: it never offsets a charge.
--   * FREEZE and UNFREEZE are holds, not movements: they count for nothing.
--   * Amounts compare within one currency: when the flows that move money (all but the holds)
--     span more than one currency, money moved, whatever the numbers say.
-- A query for one business object is answered through fund_flows_by_biz: its conditions on the
-- grouping columns are pushed below the GROUP BY.

CREATE OR REPLACE VIEW idem.money_position AS
SELECT f.biz_type,
       f.biz_id,
       (count(DISTINCT f.currency) FILTER (WHERE f.kind NOT IN ('FREEZE', 'UNFREEZE')) > 1
        OR coalesce(sum(f.amount_minor) FILTER (WHERE f.kind IN ('DEBIT', 'CAPTURE')), 0)
           > coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = 'REFUND'), 0)) AS money_moved,
       coalesce(sum(f.amount_minor) FILTER (WHERE f.kind IN ('DEBIT', 'CAPTURE')), 0) AS charged_minor,
       coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = 'REFUND'), 0) AS refunded_minor,
       coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = 'CREDIT'), 0) AS credited_minor,
       coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = 'FREEZE'), 0)
         - coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = 'UNFREEZE'), 0) AS held_minor,
       -- The one currency of the object's flows; NULL when they span several (see currencies).
       CASE WHEN count(DISTINCT f.currency) = 1 THEN min(f.currency::text) END AS currency,
       array_agg(DISTINCT f.currency::text ORDER BY f.currency::text) AS currencies,
       count(*) AS flow_count,
       count(*) FILTER (WHERE f.duplicate_of IS NOT NULL) AS duplicate_flow_count,
       max(f.created_at) AS last_flow_at
  FROM idem.fund_flows AS f
 GROUP BY f.biz_type, f.biz_id;

COMMENT ON VIEW idem.money_position IS
    'Money moved per business object (schema contract v2): DEBIT+CAPTURE exceed REFUND within one currency, or the non-hold flows span several currencies. FREEZE/UNFREEZE are holds; CREDIT does not offset. No row: no flows, nothing moved. The one definition: settle, resolve and begin use it.';
