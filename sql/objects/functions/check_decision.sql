-- The bounds of a decision (settle, resolve), checked before anything changes; 22023 naming the
-- field and the limit. A reason must say something a person can read.

CREATE OR REPLACE FUNCTION idem.check_decision(
    p_what text,
    p_to_status text,
    p_reason text,
    p_evidence jsonb)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
    IF p_to_status IS NULL OR p_to_status NOT IN ('SUCCESS', 'FAILED') THEN
        RAISE EXCEPTION '% moves a record to SUCCESS or FAILED, not %', p_what,
            coalesce(quote_literal(p_to_status), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT idem.has_visible_text(p_reason) THEN
        RAISE EXCEPTION '% needs a reason with at least one visible letter or digit: say what evidence the decision rests on',
            p_what USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF char_length(p_reason) > 2000 THEN
        RAISE EXCEPTION '% reason must be at most 2000 characters, got %', p_what, char_length(p_reason)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_evidence IS NOT NULL AND octet_length(p_evidence::text) > 65536 THEN
        RAISE EXCEPTION '% evidence must be at most 64 KiB (65536 bytes of JSON text), got % bytes',
            p_what, octet_length(p_evidence::text)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$function$;

COMMENT ON FUNCTION idem.check_decision(text, text, text, jsonb) IS
    'Internal: the bounds of a settle or resolve (to_status, reason not blank and at most 2000 characters, evidence at most 64 KiB), 22023 naming the field and the limit.';
