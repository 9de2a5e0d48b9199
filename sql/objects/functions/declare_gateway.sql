-- The owner declares what a gateway carries and how far its statements may be trusted.

CREATE OR REPLACE FUNCTION idem.declare_gateway(
    p_gateway text,
    p_biz_types text[],
    p_settlement_delay interval,
    p_absence_is_evidence boolean,
    p_not_found_after interval DEFAULT interval '10 minutes')
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF p_gateway IS NULL OR char_length(p_gateway) NOT BETWEEN 1 AND 64
       OR p_gateway ~ '[^A-Za-z0-9_.-]' THEN
        RAISE EXCEPTION 'gateway must be 1 to 64 characters of A-Z a-z 0-9 _ . -, got %',
            coalesce(quote_literal(left(p_gateway, 80)), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_biz_types IS NULL OR array_position(p_biz_types, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'a gateway''s business types are a list of names without NULL, got %',
            coalesce(p_biz_types::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_settlement_delay IS NULL OR p_settlement_delay < interval '0'
       OR p_settlement_delay > interval '60 days' THEN
        RAISE EXCEPTION 'settlement delay must be between 0 and 60 days, got %',
            coalesce(p_settlement_delay::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_not_found_after IS NULL OR p_not_found_after < interval '0'
       OR p_not_found_after > interval '7 days' THEN
        RAISE EXCEPTION 'the age before a "did not happen" answer counts must be between 0 and 7 days, got %',
            coalesce(p_not_found_after::text, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(p_absence_is_evidence, false) AND cardinality(p_biz_types) = 0 THEN
        RAISE EXCEPTION 'absence in % statements can only be evidence for business types it carries: name them',
            p_gateway USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO idem.gateways AS g (gateway, biz_types, settlement_delay, absence_is_evidence,
                                    not_found_after)
    VALUES (p_gateway, p_biz_types, p_settlement_delay, coalesce(p_absence_is_evidence, false),
            p_not_found_after)
    ON CONFLICT (gateway) DO UPDATE
       SET biz_types = EXCLUDED.biz_types, settlement_delay = EXCLUDED.settlement_delay,
           absence_is_evidence = EXCLUDED.absence_is_evidence,
           not_found_after = EXCLUDED.not_found_after,
           declared_by = session_user, declared_at = now();
END
$function$;

COMMENT ON FUNCTION idem.declare_gateway(text, text[], interval, boolean, interval) IS
    'The owner''s declaration of a gateway: the business types whose side effects it carries, how long a side effect takes to reach its statement, whether the absence of a line in its final statements is evidence (off unless enabled here), and how old a record''s last change must be before the gateway''s status answer "did not happen" decides it (default 10 minutes).';
