CREATE OR REPLACE FUNCTION idem.count_charge()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    INSERT INTO idem.charged_objects AS o (biz_type, biz_id, charges, last_charge_at)
    VALUES (NEW.biz_type, NEW.biz_id, 1, NEW.created_at)
    ON CONFLICT (biz_type, biz_id) DO UPDATE
       SET charges = o.charges + 1,
           last_charge_at = greatest(o.last_charge_at, EXCLUDED.last_charge_at);
    RETURN NULL;
END
$function$;
