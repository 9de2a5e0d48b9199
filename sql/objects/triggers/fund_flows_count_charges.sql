-- Each charge is counted into idem.charged_objects as its flow is written (idem.count_charge): once
-- a statement, for all the flows it wrote.

CREATE OR REPLACE TRIGGER fund_flows_count_charges
    AFTER INSERT ON idem.fund_flows
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT
    EXECUTE FUNCTION idem.count_charge();
