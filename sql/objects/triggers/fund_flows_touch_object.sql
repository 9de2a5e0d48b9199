CREATE OR REPLACE TRIGGER fund_flows_touch_object
    AFTER INSERT ON idem.fund_flows
    FOR EACH ROW
    EXECUTE FUNCTION idem.flow_touches_object();
