-- Where a partition of the history ends: the upper bound of its range, from the catalog. NULL for
-- a table that does not exist or is not a range partition (the DEFAULT one).

CREATE OR REPLACE FUNCTION idem.history_partition_end(p_partition text)
 RETURNS timestamp with time zone
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz
      FROM pg_class AS c
     WHERE c.oid = to_regclass('idem.' || quote_ident(p_partition)) AND c.relispartition
$function$;

COMMENT ON FUNCTION idem.history_partition_end(text) IS
    'The upper bound of a history partition''s range (NULL for the DEFAULT partition or no such table).';
