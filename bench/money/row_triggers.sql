-- The ledger's two fund-flow triggers as they were written before they became statement-level:
-- one call, and one upsert each, a row. bench/money/flow_cost.sh installs them for its "row"
-- variant to weigh the statement-level ones against them in the same run; the objects in
-- sql/objects/triggers put the shipped ones back.
SET client_min_messages = warning;
CREATE SCHEMA IF NOT EXISTS bench;
CREATE OR REPLACE FUNCTION bench.count_charge_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO idem.charged_objects AS o (biz_type, biz_id, charges, last_charge_at)
    VALUES (NEW.biz_type, NEW.biz_id, 1, NEW.created_at)
    ON CONFLICT (biz_type, biz_id) DO UPDATE
       SET charges = o.charges + 1,
           last_charge_at = greatest(o.last_charge_at, EXCLUDED.last_charge_at);
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION bench.touch_object_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM idem.touch_ledger_object(NEW.biz_type, NEW.biz_id);
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER fund_flows_count_charges
    AFTER INSERT ON idem.fund_flows
    FOR EACH ROW WHEN (NEW.kind::text IN ('DEBIT', 'CAPTURE'))
    EXECUTE FUNCTION bench.count_charge_row();
CREATE OR REPLACE TRIGGER fund_flows_touch_object
    AFTER INSERT ON idem.fund_flows
    FOR EACH ROW
    EXECUTE FUNCTION bench.touch_object_row();
