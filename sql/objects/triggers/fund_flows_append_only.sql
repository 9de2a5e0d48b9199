CREATE OR REPLACE TRIGGER fund_flows_append_only
    BEFORE UPDATE ON idem.fund_flows
    FOR EACH ROW
    EXECUTE FUNCTION idem.refuse_update();
