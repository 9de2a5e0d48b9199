-- The same story for every key of one business object: its records' keys and its flows' keys
-- (records_biz_id_prefix, fund_flows_by_biz), and the keys that tried it within the same traces
-- (attempts_by_trace: a retry refused under a new key leaves an attempt but no record), all their
-- attempts, their transitions and all the object's fund flows (also those no key recorded). The
-- admin app's timeline reads it.

CREATE OR REPLACE FUNCTION idem.business_object_story(
    p_biz_type text,
    p_biz_id text,
    p_limit integer DEFAULT 5000)
 RETURNS SETOF idem.story_event
 LANGUAGE plpgsql
 STABLE
AS $function$
DECLARE
    v_limit integer := idem.story_limit_checked('idem.business_object_story', p_limit);
    v_keys text[];
    v_ids bigint[];
BEGIN
    IF p_biz_type IS NULL OR p_biz_id IS NULL THEN
        RAISE EXCEPTION 'idem.business_object_story: give both p_biz_type and p_biz_id'
              USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_keys := ARRAY(SELECT r.idempotency_key::text
                      FROM idem.records r
                     WHERE (r.biz_id COLLATE "C") = p_biz_id AND r.biz_type = p_biz_type
                    UNION
                    SELECT f.idempotency_key
                      FROM idem.fund_flows f
                     WHERE f.biz_type = p_biz_type AND f.biz_id = p_biz_id
                       AND f.idempotency_key IS NOT NULL);
    v_ids := ARRAY(SELECT a.id FROM idem.attempts a WHERE a.idempotency_key = ANY(v_keys)
                   UNION
                   SELECT b.id
                     FROM idem.attempts b
                    WHERE b.trace_id IN (SELECT a.trace_id
                                           FROM idem.attempts a
                                          WHERE a.idempotency_key = ANY(v_keys)
                                            AND a.trace_id IS NOT NULL)
                      AND b.biz_type = p_biz_type AND b.biz_id = p_biz_id);
    v_keys := ARRAY(SELECT unnest(v_keys)
                    UNION
                    SELECT a.idempotency_key FROM idem.attempts a WHERE a.id = ANY(v_ids));
    RETURN QUERY
    SELECT s.*
      FROM idem.story_events(v_ids, v_keys, ARRAY[p_biz_type], ARRAY[p_biz_id], v_limit) AS s;
END
$function$;

COMMENT ON FUNCTION idem.business_object_story(text, text, integer) IS
    'The story of one business object: every attempt of each of its keys, their transitions and all its fund flows, in time order (at, attempt < transition < fund_flow, event_id): the latest p_limit events. The admin app''s timeline.';
