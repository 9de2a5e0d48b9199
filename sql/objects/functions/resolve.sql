-- The reconciler's decision from evidence it found (a gateway lookup, a statement line).

CREATE OR REPLACE FUNCTION idem.resolve(
    p_key text,
    p_expected_version integer,
    p_to_status text,
    p_reason text,
    p_evidence jsonb,
    OUT result text,
    OUT status text,
    OUT version integer)
 RETURNS record
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
    PERFORM idem.check_decision('resolve', p_to_status, p_reason, p_evidence);
    IF p_evidence IS NULL OR jsonb_typeof(p_evidence) <> 'object' OR p_evidence = '{}'::jsonb THEN
        RAISE EXCEPTION 'resolve needs evidence: a non-empty JSON object (what the lookup found), got %',
            coalesce(left(p_evidence::text, 40), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO result, status, version
      FROM idem.decide('reconciler', p_key, p_expected_version, p_to_status, p_reason, p_evidence,
                       false);
END
$function$;

COMMENT ON FUNCTION idem.resolve(text, integer, text, text, jsonb) IS
    'The reconciler''s decision from evidence (schema contract v3): UNKNOWN or PROCESSING past its lease -> SUCCESS or FAILED; evidence a required non-empty JSON object (at most 64 KiB), reason required (at most 2000 characters). result ok | conflict | invalid_transition | not_found | lease_active | side_effect_recorded (FAILED refused, no override). Resolving FAILED sets retry_allowed. Actor kind reconciler.';
