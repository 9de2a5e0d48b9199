CREATE OR REPLACE TRIGGER attempts_append_only
    BEFORE UPDATE ON idem.attempts
    FOR EACH ROW
    EXECUTE FUNCTION idem.refuse_update();
