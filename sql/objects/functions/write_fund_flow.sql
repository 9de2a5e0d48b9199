-- Writes one flow, after the checks: the same external_ref twice returns the first row and writes
-- nothing; a different external_ref for a business object and kind that has a flow is recorded as
-- a duplicate of the first. Not granted to anyone: the two record_fund_flow forms call it.
-- A line already recorded is found by a read before any insert, so a repeated or refused call
-- takes no id from the sequence: an id taken without a row is a gap the exporter must track, and a
-- writer repeating a line must not be able to flood it. Only two callers racing on one new line or
-- one new first flow still take an id each, once.

CREATE OR REPLACE FUNCTION idem.write_fund_flow(
    p_biz_type text,
    p_biz_id text,
    p_kind text,
    p_amount_minor bigint,
    p_currency text,
    p_external_ref text,
    p_idempotency_key text,
    p_recorded_by text,
    OUT flow_id bigint,
    OUT is_duplicate boolean,
    OUT already_recorded boolean)
 RETURNS record
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    v_first bigint;
BEGIN
    FOR round IN 1..5 LOOP
        SELECT f.id, f.duplicate_of IS NOT NULL INTO flow_id, is_duplicate
          FROM idem.fund_flows AS f WHERE f.external_ref = p_external_ref;
        IF FOUND THEN
            already_recorded := true;
            RETURN;
        END IF;
        SELECT f.id INTO v_first
          FROM idem.fund_flows AS f
         WHERE f.biz_type = p_biz_type AND f.biz_id = p_biz_id AND f.kind = p_kind
           AND f.duplicate_of IS NULL;
        -- The first flow of this business object and kind, or a duplicate of the first: the
        -- partial unique index (and the external_ref one) arbitrate between concurrent inserts.
        INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, external_ref,
                                     idempotency_key, duplicate_of, recorded_by, recorded_login)
        VALUES (p_biz_type, p_biz_id, p_kind, p_amount_minor, p_currency, p_external_ref,
                p_idempotency_key, v_first, p_recorded_by, session_user)
        ON CONFLICT DO NOTHING
        RETURNING id INTO flow_id;
        IF FOUND THEN
            is_duplicate := v_first IS NOT NULL; already_recorded := false;
            RETURN;
        END IF;
        -- The same external_ref, or a first flow, arrived concurrently: look again.
    END LOOP;
    RAISE EXCEPTION 'idem.record_fund_flow(%): the ledger kept changing under concurrent callers; retry',
        p_external_ref USING ERRCODE = 'serialization_failure';
END
$function$;

COMMENT ON FUNCTION idem.write_fund_flow(text, text, text, bigint, text, text, text, text) IS
    'Internal: writes one checked flow for record_fund_flow (either form), with who recorded it.';
