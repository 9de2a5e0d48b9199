-- The money questions total under any ledger: their sums are numeric, never bigint that two large
-- amounts overflow ("bigint out of range" froze the exporter's money gauges and the console's
-- money tabs), and a total is reported within bigint's range, at its bound beyond it (which
-- takes over nine thousand flows of the largest amount on one business object).

CREATE OR REPLACE FUNCTION idem.minor_total(p_total numeric)
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$ SELECT least(greatest(p_total, -9223372036854775808), 9223372036854775807)::bigint $function$;

COMMENT ON FUNCTION idem.minor_total(numeric) IS
    'A total of minor units as the money questions report it: the sum, within bigint''s range (at its bound beyond it).';
