CREATE OR REPLACE FUNCTION idem.touch_ledger_object(p_biz_type text, p_biz_id text)
 RETURNS void
 LANGUAGE sql
AS $function$
    INSERT INTO idem.ledger_objects AS o (biz_type, biz_id, touched_at)
    VALUES (p_biz_type, p_biz_id, pg_catalog.clock_timestamp())
    ON CONFLICT (biz_type, biz_id) DO UPDATE SET touched_at = EXCLUDED.touched_at
$function$;
