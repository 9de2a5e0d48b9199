-- The two stories' common part: the given attempts, the transitions of the given keys and the
-- fund flows of the given business objects (p_biz_types[i], p_biz_ids[i]), in time order (at,
-- then attempt < transition < fund_flow, then event_id), the latest p_limit events. Every probe is
-- by index: attempts_pkey, transitions_by_key, fund_flows_by_biz, attempts_by_key.

CREATE OR REPLACE FUNCTION idem.story_events(
    p_attempt_ids bigint[],
    p_keys text[],
    p_biz_types text[],
    p_biz_ids text[],
    p_limit integer)
 RETURNS SETOF idem.story_event
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
SELECT l.at, l.event, l.event_id, l.idempotency_key, l.biz_type, l.biz_id, l.trigger_source,
       l.outcome, l.from_status, l.to_status, l.actor, l.actor_kind, l.reason, l.flow_kind,
       l.amount_minor, l.currency, l.external_ref, l.agent_id, l.trace_id
  FROM (SELECT e.*,
               CASE e.event WHEN 'attempt' THEN 1 WHEN 'transition' THEN 2 ELSE 3 END AS event_order
          FROM (SELECT a.created_at AS at, 'attempt' AS event, a.id AS event_id,
                       a.idempotency_key, a.biz_type, a.biz_id, a.trigger_source::text,
                       a.outcome::text, NULL::text AS from_status, NULL::text AS to_status,
                       NULL::text AS actor, NULL::text AS actor_kind, NULL::text AS reason,
                       NULL::text AS flow_kind, NULL::bigint AS amount_minor,
                       NULL::text AS currency, NULL::text AS external_ref, a.agent_id, a.trace_id
                  FROM idem.attempts a
                 WHERE a.id = ANY(p_attempt_ids)
                UNION ALL
                SELECT t.created_at, 'transition', t.id, t.idempotency_key, o.biz_type, o.biz_id,
                       NULL, NULL, t.from_status::text, t.to_status::text, t.actor,
                       t.actor_kind::text, t.reason, NULL, NULL, NULL, NULL, NULL, NULL
                  FROM idem.transitions t
                  LEFT JOIN LATERAL (SELECT a.biz_type, a.biz_id
                                       FROM idem.attempts a
                                      WHERE a.idempotency_key = t.idempotency_key
                                      ORDER BY a.id
                                      LIMIT 1) AS o ON true
                 WHERE t.idempotency_key = ANY(p_keys)
                UNION ALL
                SELECT f.created_at, 'fund_flow', f.id, f.idempotency_key, f.biz_type::text,
                       f.biz_id::text, NULL, NULL, NULL, NULL, NULL, NULL, NULL, f.kind::text,
                       f.amount_minor::bigint, f.currency::text, f.external_ref::text, NULL, NULL
                  FROM unnest(p_biz_types, p_biz_ids) AS b(biz_type, biz_id)
                  JOIN idem.fund_flows f ON f.biz_type = b.biz_type AND f.biz_id = b.biz_id) AS e
         -- The latest p_limit events (an incident is read from its end), then in time order.
         ORDER BY e.at DESC, event_order DESC, e.event_id DESC
         LIMIT p_limit) AS l
 ORDER BY l.at, l.event_order, l.event_id
$function$;

COMMENT ON FUNCTION idem.story_events(bigint[], text[], text[], text[], integer) IS
    'The common part of idem.trace_story and idem.business_object_story: the given attempts, the transitions of the given keys, the fund flows of the given business objects, in time order. Call those two instead.';
