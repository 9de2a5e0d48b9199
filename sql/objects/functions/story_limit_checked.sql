CREATE OR REPLACE FUNCTION idem.story_limit_checked(p_what text, p_limit integer)
 RETURNS integer
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION '%: p_limit must be a positive number of events, got %', p_what,
                        coalesce(p_limit::text, 'NULL')
              USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN p_limit;
END
$function$;
