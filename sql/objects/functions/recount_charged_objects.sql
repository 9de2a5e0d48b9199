-- Rebuilds idem.charged_objects from the ledger, for a database loaded with triggers off. Takes
-- the ledger's SHARE ROW EXCLUSIVE lock (flows wait, readers do not) for the time it runs.

CREATE OR REPLACE FUNCTION idem.recount_charged_objects()
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_count bigint;
BEGIN
    LOCK TABLE idem.fund_flows IN SHARE ROW EXCLUSIVE MODE;
    DELETE FROM idem.charged_objects;
    INSERT INTO idem.charged_objects (biz_type, biz_id, charges, last_charge_at)
    SELECT f.biz_type, f.biz_id, count(*), max(f.created_at)
      FROM idem.fund_flows AS f
     WHERE f.kind IN ('DEBIT', 'CAPTURE')
     GROUP BY f.biz_type, f.biz_id;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$function$;
