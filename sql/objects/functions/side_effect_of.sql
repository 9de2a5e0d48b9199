-- What the settle path, the admin app and idemctl show an operator about one record's side effect.

CREATE OR REPLACE FUNCTION idem.side_effect_of(p_key text)
 RETURNS TABLE(
    biz_type text,
    biz_id text,
    declared boolean,
    effect_kinds text[],
    reversal_kinds text[],
    description text,
    ledger_can_tell boolean,
    under_own_key boolean,
    for_business_object boolean,
    side_effect_recorded boolean)
 LANGUAGE sql
 STABLE
AS $function$
    SELECT r.biz_type::text, r.biz_id::text, d.declared, d.effect_kinds, d.reversal_kinds,
           d.description, cardinality(d.effect_kinds) > 0, k.under_key,
           coalesce(p.side_effect_recorded, false),
           k.under_key OR coalesce(p.side_effect_recorded, false)
      FROM idem.records AS r
     CROSS JOIN LATERAL idem.business_type(r.biz_type) AS d
     CROSS JOIN LATERAL (SELECT EXISTS (SELECT 1 FROM idem.fund_flows AS f
                                         WHERE f.biz_type = r.biz_type AND f.biz_id = r.biz_id
                                           AND f.idempotency_key = r.idempotency_key
                                           AND f.kind = ANY (d.effect_kinds)) AS under_key) AS k
      LEFT JOIN idem.side_effect_position AS p ON p.biz_type = r.biz_type AND p.biz_id = r.biz_id
     WHERE r.idempotency_key = p_key
$function$;

COMMENT ON FUNCTION idem.side_effect_of(text) IS
    'One record''s side effect as the ledger knows it: its type''s declaration, whether the ledger can tell at all (ledger_can_tell false: FAILED is a person''s word), and whether an effect flow is under its own key or its business object''s position records it. No row: no such key.';
