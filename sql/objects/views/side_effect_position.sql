-- The ledger's word on each business object, per its type's declaration: its side effect is
-- recorded when a flow of an effect kind exists and the reversals have not given it all back
-- (within one currency; effect and reversal flows in several currencies count as recorded).

CREATE OR REPLACE VIEW idem.side_effect_position AS
SELECT f.biz_type,
       f.biz_id,
       d.declared,
       d.effect_kinds,
       d.reversal_kinds,
       count(*) FILTER (WHERE f.kind = ANY (d.effect_kinds)) AS effect_flows,
       coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = ANY (d.effect_kinds)), 0) AS effect_minor,
       count(*) FILTER (WHERE f.kind = ANY (d.reversal_kinds)) AS reversal_flows,
       coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = ANY (d.reversal_kinds)), 0) AS reversed_minor,
       (count(*) FILTER (WHERE f.kind = ANY (d.effect_kinds)) > 0
        AND (count(*) FILTER (WHERE f.kind = ANY (d.reversal_kinds)) = 0
             OR count(DISTINCT f.currency)
                  FILTER (WHERE f.kind = ANY (d.effect_kinds || d.reversal_kinds)) > 1
             OR coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = ANY (d.effect_kinds)), 0)
                > coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = ANY (d.reversal_kinds)), 0)))
           AS side_effect_recorded,
       max(f.id) AS last_flow_id
  FROM idem.fund_flows AS f
 CROSS JOIN LATERAL idem.business_type(f.biz_type) AS d
 GROUP BY f.biz_type, f.biz_id, d.declared, d.effect_kinds, d.reversal_kinds;

COMMENT ON VIEW idem.side_effect_position IS
    'Per business object with flows: does the ledger record its type''s side effect (idem.business_types)? effect flows exist and the reversals have not given it all back, within one currency. No row: no flows. For one record, idem.side_effect_recorded also counts effect flows under its own key.';
