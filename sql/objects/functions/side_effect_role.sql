-- What one flow of the ledger is to its business object's side effect, as its business type
-- declares it (idem.business_type, with its cautious reading of an undeclared type): 'effect' (it
-- proves the side effect: a payment's DEBIT or CAPTURE), 'reversal' (it gives it back: a payment's
-- REFUND) or 'none' (a hold, or a kind the type does not count). The admin app and the reports
-- colour and count flows by it rather than by a list of kinds of their own.

CREATE OR REPLACE FUNCTION idem.side_effect_role(p_biz_type text, p_kind text)
 RETURNS text
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
    SELECT CASE WHEN p_kind = ANY (t.effect_kinds) THEN 'effect'
                WHEN p_kind = ANY (t.reversal_kinds) THEN 'reversal'
                ELSE 'none' END
      FROM idem.business_type(p_biz_type) AS t
$function$;

COMMENT ON FUNCTION idem.side_effect_role(text, text) IS
    'What a flow of kind p_kind is to the side effect of a p_biz_type business object, as the type declares it: effect, reversal or none.';
