-- The history and the ledger are append-only: rows are added, or removed by retention, never
-- edited.

CREATE OR REPLACE FUNCTION idem.refuse_update()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION '%.% is append-only: rows are never updated', TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'check_violation', CONSTRAINT = TG_TABLE_NAME || '_append_only';
END
$function$;
