CREATE OR REPLACE FUNCTION idem.flow_touches_object()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- idem.touch_ledger_object for each business object the statement's flows name, once, in
    -- the objects' order.
    INSERT INTO idem.ledger_objects AS o (biz_type, biz_id, touched_at)
    SELECT a.biz_type, a.biz_id, pg_catalog.clock_timestamp()
      FROM added AS a
     GROUP BY a.biz_type, a.biz_id
     ORDER BY a.biz_type, a.biz_id
    ON CONFLICT (biz_type, biz_id) DO UPDATE SET touched_at = EXCLUDED.touched_at;
    RETURN NULL;
END
$function$;
