CREATE OR REPLACE TRIGGER fund_flows_touch_object
    AFTER INSERT ON idem.fund_flows
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT
    EXECUTE FUNCTION idem.flow_touches_object();
