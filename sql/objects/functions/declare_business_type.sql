-- The owner declares what its business types' side effects are.

CREATE OR REPLACE FUNCTION idem.declare_business_type(
    p_biz_type text,
    p_effect_kinds text[],
    p_reversal_kinds text[],
    p_description text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF p_biz_type IS NULL OR char_length(p_biz_type) NOT BETWEEN 1 AND 64
       OR p_biz_type ~ '[^A-Za-z0-9_.-]' THEN
        RAISE EXCEPTION 'biz_type must be 1 to 64 characters of A-Z a-z 0-9 _ . -, got %',
            coalesce(quote_literal(left(p_biz_type, 80)), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_effect_kinds IS NULL OR NOT (p_effect_kinds <@ ARRAY['DEBIT', 'CREDIT', 'REFUND', 'CAPTURE']) THEN
        RAISE EXCEPTION 'effect kinds must be among DEBIT, CREDIT, REFUND, CAPTURE (holds prove nothing), got %',
            coalesce(p_effect_kinds::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_reversal_kinds IS NULL OR NOT (p_reversal_kinds <@ ARRAY['DEBIT', 'CREDIT', 'REFUND', 'CAPTURE']) THEN
        RAISE EXCEPTION 'reversal kinds must be among DEBIT, CREDIT, REFUND, CAPTURE, got %',
            coalesce(p_reversal_kinds::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_effect_kinds && p_reversal_kinds THEN
        RAISE EXCEPTION 'a kind cannot both prove and reverse the side effect: % and %',
            p_effect_kinds, p_reversal_kinds USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(p_reversal_kinds) > 0 AND cardinality(p_effect_kinds) = 0 THEN
        RAISE EXCEPTION 'reversal kinds need effect kinds to reverse'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF idem.is_blank(p_description) THEN
        RAISE EXCEPTION 'a business type needs a description: what its side effect is'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO idem.business_types AS t (biz_type, effect_kinds, reversal_kinds, description)
    VALUES (p_biz_type, p_effect_kinds, p_reversal_kinds, p_description)
    ON CONFLICT (biz_type) DO UPDATE
       SET effect_kinds = EXCLUDED.effect_kinds, reversal_kinds = EXCLUDED.reversal_kinds,
           description = EXCLUDED.description, declared_by = session_user, declared_at = now();
END
$function$;

COMMENT ON FUNCTION idem.declare_business_type(text, text[], text[], text) IS
    'Declares (or redeclares) what proves a business type''s side effect: effect kinds, reversal kinds, a description. Run by the schema''s owner; takes effect for every guard at once.';
