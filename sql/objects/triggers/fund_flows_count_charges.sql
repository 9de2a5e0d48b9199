-- Each charge is counted into idem.charged_objects as its flow is written (idem.count_charge).

CREATE OR REPLACE TRIGGER fund_flows_count_charges
    AFTER INSERT ON idem.fund_flows
    FOR EACH ROW WHEN (((new.kind)::text = ANY (ARRAY['DEBIT'::text, 'CAPTURE'::text])))
    EXECUTE FUNCTION idem.count_charge();
