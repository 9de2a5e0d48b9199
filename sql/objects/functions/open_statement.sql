-- A statement file's import begins: once per file content. The importer (idemctl
-- import-statement, as idem_ledger) then adds its lines in batches and closes it, all in one
-- transaction, so that a file is imported whole or not at all. A second import of the same file,
-- or one running at the same moment (it waits on the unique index), finds the first and changes
-- nothing.

CREATE OR REPLACE FUNCTION idem.open_statement(
    p_gateway text,
    p_format text,
    p_file_name text,
    p_file_sha256 text,
    OUT statement_id bigint,
    OUT already_imported boolean)
 RETURNS record
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
BEGIN
    IF p_gateway IS NULL OR char_length(p_gateway) NOT BETWEEN 1 AND 64
       OR p_gateway ~ '[^A-Za-z0-9_.-]' THEN
        RAISE EXCEPTION 'gateway must be 1 to 64 characters of A-Z a-z 0-9 _ . -, got %',
            coalesce(quote_literal(left(p_gateway, 80)), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_file_sha256 IS NULL OR p_file_sha256 !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'a statement is named by the SHA-256 of its file: 64 lower-case hex digits, got %',
            coalesce(quote_literal(left(p_file_sha256, 80)), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A gateway first seen here starts with the safe settings: absence is no evidence.
    INSERT INTO idem.gateways (gateway) VALUES (p_gateway) ON CONFLICT DO NOTHING;
    INSERT INTO idem.statements (gateway, format, file_name, file_sha256)
    VALUES (p_gateway, p_format, left(coalesce(p_file_name, ''), 1000), p_file_sha256)
    ON CONFLICT (gateway, file_sha256) DO NOTHING
    RETURNING id INTO statement_id;
    IF FOUND THEN
        already_imported := false;
        RETURN;
    END IF;
    SELECT s.id INTO statement_id
      FROM idem.statements AS s WHERE s.gateway = p_gateway AND s.file_sha256 = p_file_sha256;
    already_imported := true;
END
$function$;

COMMENT ON FUNCTION idem.open_statement(text, text, text, text) IS
    'The gateway''s word (idem_ledger): begins importing a statement file, once per (gateway, SHA-256 of the file): already_imported true (and the first import''s id) when it was imported before; a gateway not seen before is recorded with absence_is_evidence off. Lines follow with idem.add_statement_lines, then idem.close_statement (which sets its period and whether it is final), in the same transaction.';
