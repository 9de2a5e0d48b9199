CREATE OR REPLACE TRIGGER records_guard
    BEFORE INSERT OR UPDATE ON idem.records
    FOR EACH ROW
    EXECUTE FUNCTION idem.records_guard();
