CREATE OR REPLACE TRIGGER transitions_append_only
    BEFORE UPDATE ON idem.transitions
    FOR EACH ROW
    EXECUTE FUNCTION idem.refuse_update();
