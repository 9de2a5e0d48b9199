CREATE OR REPLACE FUNCTION idem.count_charge()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- The statement's charges, one row a business object (an import writes thousands of flows
    -- in one statement), taken in the objects' order so that two writers lock them alike.
    INSERT INTO idem.charged_objects AS o (biz_type, biz_id, charges, last_charge_at)
    SELECT a.biz_type, a.biz_id, count(*), max(a.created_at)
      FROM added AS a
     WHERE a.kind::text IN ('DEBIT', 'CAPTURE')
     GROUP BY a.biz_type, a.biz_id
     ORDER BY a.biz_type, a.biz_id
    ON CONFLICT (biz_type, biz_id) DO UPDATE
       SET charges = o.charges + EXCLUDED.charges,
           last_charge_at = greatest(o.last_charge_at, EXCLUDED.last_charge_at);
    RETURN NULL;
END
$function$;
