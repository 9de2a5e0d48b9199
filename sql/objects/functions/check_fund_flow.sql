-- The checks every flow passes, whoever records it (22023 naming the field).

CREATE OR REPLACE FUNCTION idem.check_fund_flow(
    p_biz_type text,
    p_biz_id text,
    p_kind text,
    p_amount_minor bigint,
    p_currency text,
    p_external_ref text)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
    IF p_kind IS NULL OR p_kind <> ALL (idem.vocabulary('fund_flow_kind')) THEN
        RAISE EXCEPTION 'unknown fund flow kind %: expected %',
            coalesce(quote_literal(left(p_kind, 40)), 'NULL'),
            array_to_string(idem.vocabulary('fund_flow_kind'), ', ')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_currency IS NULL OR p_currency !~ '^[A-Z]{3}$' THEN
        RAISE EXCEPTION 'currency must be three capital letters (ISO 4217), got %',
            coalesce(quote_literal(left(p_currency, 40)), 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_amount_minor IS NULL OR p_amount_minor < 0 OR p_amount_minor > 999999999999999 THEN
        RAISE EXCEPTION 'amount_minor must be 0 to 999999999999999 minor units (ten trillion in a two-decimal currency), got %',
            coalesce(p_amount_minor::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_biz_type IS NULL OR char_length(p_biz_type) NOT BETWEEN 1 AND 64 OR p_biz_type ~ '[^A-Za-z0-9_.-]' THEN
        RAISE EXCEPTION 'biz_type must be 1 to 64 characters of A-Z a-z 0-9 _ . -, got %',
            CASE WHEN p_biz_type IS NULL THEN 'NULL'
                 WHEN char_length(p_biz_type) > 64 THEN char_length(p_biz_type)::text || ' characters'
                 ELSE quote_literal(p_biz_type) END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF idem.is_blank(p_biz_id) OR char_length(p_biz_id) > 255 THEN
        RAISE EXCEPTION 'biz_id must be 1 to 255 characters and not blank, got %',
            coalesce(char_length(p_biz_id)::text || ' characters', 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF idem.is_blank(p_external_ref) OR char_length(p_external_ref) > 255 THEN
        RAISE EXCEPTION 'external_ref must be 1 to 255 characters and not blank, got %',
            coalesce(char_length(p_external_ref)::text || ' characters', 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$function$;

COMMENT ON FUNCTION idem.check_fund_flow(text, text, text, bigint, text, text) IS
    'Internal: the bounds of a fund flow, whoever records it (22023 naming the field).';
