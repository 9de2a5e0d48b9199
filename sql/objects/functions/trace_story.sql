-- Every attempt of one trace (p_trace_id) or of one agent (p_agent_id), across all its keys, plus
-- the transitions of those keys and the fund flows of those keys' business objects, in time order;
-- the latest p_limit events (of the latest p_limit attempts, when there are more). A lease expiry
-- is the transition PROCESSING -> UNKNOWN made by idem.expire_leases (its reason says so). Found
-- through attempts_by_trace / attempts_by_agent below.

CREATE OR REPLACE FUNCTION idem.trace_story(
    p_trace_id text,
    p_agent_id text,
    p_limit integer DEFAULT 5000)
 RETURNS SETOF idem.story_event
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
    v_limit integer := idem.story_limit_checked('idem.trace_story', p_limit);
    v_ids bigint[];
BEGIN
    IF p_trace_id IS NULL AND p_agent_id IS NULL THEN
        RAISE EXCEPTION 'idem.trace_story: give p_trace_id or p_agent_id; both are NULL'
              USING ERRCODE = 'invalid_parameter_value';
    ELSIF p_trace_id IS NOT NULL AND p_agent_id IS NOT NULL THEN
        RAISE EXCEPTION 'idem.trace_story: give p_trace_id or p_agent_id, not both'
              USING ERRCODE = 'invalid_parameter_value';
    ELSIF p_trace_id IS NOT NULL THEN
        v_ids := ARRAY(SELECT a.id FROM idem.attempts a WHERE a.trace_id = p_trace_id
                        ORDER BY a.created_at DESC, a.id DESC LIMIT v_limit);
    ELSE
        -- A busy agent has a long history: its latest attempts, walked backwards by the index.
        v_ids := ARRAY(SELECT a.id FROM idem.attempts a WHERE a.agent_id = p_agent_id
                        ORDER BY a.created_at DESC, a.id DESC LIMIT v_limit);
    END IF;
    RETURN QUERY
    WITH k AS (SELECT DISTINCT a.idempotency_key, a.biz_type, a.biz_id
                 FROM idem.attempts a
                WHERE a.id = ANY(v_ids)),
         o AS (SELECT DISTINCT k.biz_type, k.biz_id FROM k)
    SELECT s.*
      FROM idem.story_events(v_ids,
                             ARRAY(SELECT DISTINCT k.idempotency_key FROM k),
                             ARRAY(SELECT o.biz_type FROM o ORDER BY o.biz_type, o.biz_id),
                             ARRAY(SELECT o.biz_id FROM o ORDER BY o.biz_type, o.biz_id),
                             v_limit) AS s;
END
$function$;

COMMENT ON FUNCTION idem.trace_story(text, text, integer) IS
    'Every attempt of one trace or one agent (exactly one of the two given), the transitions of their keys and the fund flows of their business objects, in time order (at, attempt < transition < fund_flow, event_id): the latest p_limit events. The admin app''s Trace audit tab.';
