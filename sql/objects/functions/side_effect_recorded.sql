-- The one definition every guard reads: the side effect of the record (biz_type, biz_id, key)
-- happened, as far as the ledger knows: an effect flow under its own key, or its business object's
-- position.

CREATE OR REPLACE FUNCTION idem.side_effect_recorded(p_biz_type text, p_biz_id text, p_key text)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
    SELECT EXISTS (SELECT 1 FROM idem.fund_flows AS f
                    WHERE f.biz_type = p_biz_type AND f.biz_id = p_biz_id
                      AND f.idempotency_key = p_key
                      AND f.kind = ANY ((idem.business_type(p_biz_type)).effect_kinds))
        OR coalesce((SELECT p.side_effect_recorded FROM idem.side_effect_position AS p
                      WHERE p.biz_type = p_biz_type AND p.biz_id = p_biz_id), false)
$function$;

COMMENT ON FUNCTION idem.side_effect_recorded(text, text, text) IS
    'Does the ledger record the side effect of the record (biz_type, biz_id, key)? A flow of one of its type''s effect kinds under its own key, or idem.side_effect_position for its business object. FAILED is refused and a FAILED record is not claimed again when it does.';
