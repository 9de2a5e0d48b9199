-- The amount a request asks for, as every comparison with the gateway's word reads it: the
-- request's "amount_minor" as a whole number of minor units, written as a JSON number or as text,
-- with or without a zero fraction (2990, "2990", 2990.0); NULL when the request names none, or
-- names something that is not such a number (no line can then be said to agree with it). One
-- rule for the statement's matching, an operator's accepted proposal, the proposals the console
-- offers and the absence rule, so that they never disagree about one request.

CREATE OR REPLACE FUNCTION idem.request_amount_minor(p_request jsonb)
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
SELECT CASE WHEN p_request ->> 'amount_minor' ~ '^[0-9]{1,18}(\.0*)?$'
            THEN (p_request ->> 'amount_minor')::numeric::bigint END
$function$;

COMMENT ON FUNCTION idem.request_amount_minor(jsonb) IS
    'The amount_minor a request payload names, as a whole number of minor units (2990, "2990" or 2990.0); NULL when it names none or something else.';
