-- A business type's declaration, or the cautious reading of an undeclared one.

CREATE OR REPLACE FUNCTION idem.business_type(
    p_biz_type text,
    OUT declared boolean,
    OUT effect_kinds text[],
    OUT reversal_kinds text[],
    OUT description text)
 RETURNS record
 LANGUAGE sql
 STABLE
AS $function$
    SELECT t.biz_type IS NOT NULL,
           coalesce(t.effect_kinds, ARRAY['DEBIT', 'CREDIT', 'REFUND', 'CAPTURE']),
           coalesce(t.reversal_kinds, '{}'::text[]),
           coalesce(t.description,
                    'not declared: any DEBIT, CREDIT, REFUND or CAPTURE proves its side effect')
      FROM (SELECT 1) AS one
      LEFT JOIN idem.business_types AS t ON t.biz_type = p_biz_type
$function$;

COMMENT ON FUNCTION idem.business_type(text) IS
    'The declaration of a business type (idem.business_types), or for an undeclared one the cautious reading: any DEBIT, CREDIT, REFUND or CAPTURE proves its side effect, nothing reverses it.';
