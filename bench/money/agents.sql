-- For bench/protocol's before-and-after of the trace audit's indexes (docs/benchmarks.md):
-- bench_protocol's begin sends no agent_id or trace_id, which would leave the partial indexes
-- attempts_by_trace and attempts_by_agent untouched. In the scratch database only, this trigger
-- gives every attempt an agent (one of 100) and a trace of its own, as agents that send them do;
-- it runs in both measurements, so the difference is the indexes'.
CREATE FUNCTION idem.bench_fill_agent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.agent_id := coalesce(NEW.agent_id, 'agent-' || (NEW.id % 100));
    NEW.trace_id := coalesce(NEW.trace_id, 'trace-' || NEW.id);
    RETURN NEW;
END
$$;
CREATE TRIGGER bench_fill_agent BEFORE INSERT ON idem.attempts
    FOR EACH ROW EXECUTE FUNCTION idem.bench_fill_agent();
