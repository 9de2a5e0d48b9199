CREATE OR REPLACE FUNCTION idem.flow_touches_object()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM idem.touch_ledger_object(NEW.biz_type, NEW.biz_id);
    RETURN NULL;
END
$function$;
