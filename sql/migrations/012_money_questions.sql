-- One definition of each money question, read by the exporter, the admin app and the
-- runbooks alike, instead of three copies of the SQL that drift:
--   idem.money_moved_without_success   a DEBIT or CAPTURE, no SUCCESS record nor tombstone
--   idem.success_without_money_moved   a SUCCESS record, no DEBIT or CAPTURE flow
--   idem.overcharged_objects           DEBIT+CAPTURE beyond the first charge plus REFUNDs
--   idem.trace_story                   every attempt of a trace or an agent, and what followed
--   idem.business_object_story         the same, for every key of one business object
-- Money moves by a DEBIT or a CAPTURE (the capture of a FREEZE hold); FREEZE and UNFREEZE are
-- holds, CREDIT is not a refund, amounts compare within one currency (docs/contract/schema.md,
-- "Money moved").
--
-- Why their cost follows the window, not the tables: each walks only the window's rows (BRIN on
-- created_at, or the records_by_updated range) and probes the other table by index for each of
-- them (docs/benchmarks.md has the plans). A NOT EXISTS probe ends in OFFSET 0, which keeps it a
-- correlated subplan (one index probe per row): PostgreSQL does not turn a subquery with an OFFSET
-- into an anti join, which it might run as a hash or merge join over the whole other table, a
-- cost that grows with the table instead of the window (a subquery with a UNION is kept a subplan
-- alike). The others are LATERAL subqueries with a LIMIT or a GROUP BY, probed per row alike.
--
-- The three reconciliation questions are single-statement SQL functions, STABLE like the now()
-- they read and not SECURITY DEFINER: the planner inlines them into the calling query, so the
-- exporter's count(*) over one plans as that count. Their callers read the tables themselves
-- (the reader and operator roles have SELECT on them).

-- Who holds a record of a business object: records has no (biz_type, biz_id) index over every
-- status (records_one_live_per_biz skips FAILED ones); the admin app's records_biz_id_prefix
-- (sql/005_admin.sql) indexes biz_id under the "C" collation, and an equality under "C" is the
-- same equality, so `(r.biz_id COLLATE "C") = x AND r.biz_type = y` is one probe of it.

-- 1. The business objects charged (DEBIT or CAPTURE) in [now() - window, now() - grace) that have
-- no SUCCESS record and no SUCCESS tombstone (idem.retired_keys: a business object that succeeded
-- stays succeeded when retention removes its record). The exporter's
-- idempotency_reconciliation_mismatches{kind="debit_without_success"} counts its rows.
-- first_charge_*: the object's first DEBIT or CAPTURE flow (lowest id, in or before the window);
-- charges: all its DEBIT and CAPTURE flows; charged_minor: their total in the first charge's
-- currency; record_*: its most recently updated record, NULL when it has none.
CREATE FUNCTION idem.money_moved_without_success(p_biz_types text[], p_window interval,
                                                 p_grace interval)
RETURNS TABLE (biz_type text, biz_id text, first_charge_id bigint,
               first_charge_at timestamptz, first_charge_ref text, charges bigint,
               charged_minor bigint, currency text, record_key text, record_status text,
               record_version integer, record_lease_expires_at timestamptz)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
SELECT d.biz_type, d.biz_id, c.id, c.created_at, c.external_ref::text, s.charges,
       s.charged_minor, c.currency::text, r.idempotency_key::text, r.status::text, r.version,
       r.lease_expires_at
  FROM (SELECT DISTINCT f.biz_type::text, f.biz_id::text
          FROM idem.fund_flows f
         WHERE f.kind IN ('DEBIT', 'CAPTURE')
           AND f.biz_type = ANY(p_biz_types)
           AND f.created_at >= now() - p_window
           AND f.created_at < now() - p_grace) AS d
 CROSS JOIN LATERAL (SELECT f.id, f.created_at, f.external_ref, f.currency
                       FROM idem.fund_flows f
                      WHERE f.biz_type = d.biz_type AND f.biz_id = d.biz_id
                        AND f.kind IN ('DEBIT', 'CAPTURE')
                      ORDER BY f.id
                      LIMIT 1) AS c
 CROSS JOIN LATERAL (SELECT count(*) AS charges,
                            coalesce(sum(f.amount_minor) FILTER (WHERE f.currency = c.currency),
                                     0)::bigint AS charged_minor
                       FROM idem.fund_flows f
                      WHERE f.biz_type = d.biz_type AND f.biz_id = d.biz_id
                        AND f.kind IN ('DEBIT', 'CAPTURE')) AS s
  LEFT JOIN LATERAL (SELECT r.idempotency_key, r.status, r.version, r.lease_expires_at
                       FROM idem.records r
                      WHERE (r.biz_id COLLATE "C") = d.biz_id AND r.biz_type = d.biz_type
                      ORDER BY r.updated_at DESC, r.idempotency_key DESC
                      LIMIT 1) AS r ON true
-- One probe: the SUCCESS record (records_one_live_per_biz), which nearly every object has, and
-- only when there is none the tombstone (retired_keys_paid_biz). A UNION stays a subplan too.
 WHERE NOT EXISTS (SELECT FROM idem.records x
                    WHERE x.biz_type = d.biz_type AND x.biz_id = d.biz_id
                      AND x.status = 'SUCCESS'
                   UNION ALL
                   SELECT FROM idem.retired_keys t
                    WHERE t.biz_type = d.biz_type AND t.biz_id = d.biz_id
                      AND t.status = 'SUCCESS')
$$;

COMMENT ON FUNCTION idem.money_moved_without_success(text[], interval, interval) IS
    'Business objects of the given biz types with a DEBIT or CAPTURE flow created in [now()-window, now()-grace) and no SUCCESS record nor SUCCESS tombstone (idem.retired_keys). The exporter''s debit_without_success mismatches, the admin app''s Reconciliation tab.';

-- 2. The SUCCESS records updated in [now() - window, now() - grace) whose business object has no
-- DEBIT or CAPTURE flow: kind="success_without_debit". agent_id: of the key's first attempt.
CREATE FUNCTION idem.success_without_money_moved(p_biz_types text[], p_window interval,
                                                 p_grace interval)
RETURNS TABLE (biz_type text, biz_id text, idempotency_key text, version integer,
               succeeded_at timestamptz, agent_id text)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
SELECT r.biz_type::text, r.biz_id::text, r.idempotency_key::text, r.version, r.updated_at,
       a.agent_id
  FROM idem.records r
  LEFT JOIN LATERAL (SELECT a.agent_id
                       FROM idem.attempts a
                      WHERE a.idempotency_key = r.idempotency_key
                      ORDER BY a.id
                      LIMIT 1) AS a ON true
 WHERE r.updated_at >= now() - p_window
   AND r.updated_at < now() - p_grace
   AND r.status = 'SUCCESS'
   AND r.biz_type = ANY(p_biz_types)
   AND NOT EXISTS (SELECT FROM idem.fund_flows f
                    WHERE f.biz_type = r.biz_type AND f.biz_id = r.biz_id
                      AND f.kind IN ('DEBIT', 'CAPTURE')
                   OFFSET 0)
$$;

COMMENT ON FUNCTION idem.success_without_money_moved(text[], interval, interval) IS
    'SUCCESS records of the given biz types updated in [now()-window, now()-grace) whose business object has no DEBIT or CAPTURE flow. The exporter''s success_without_debit mismatches, the admin app''s Reconciliation tab.';

-- 3. Overcharges still owed (docs/contract/metrics.md v2): the business objects charged within
-- the window (BRIN on created_at), then all the flows of each (fund_flows_by_biz), so that a charge
-- inside the window is weighed against a first charge or a refund outside it. Per object and
-- currency: owed = charged - the object's first charge (when in that currency) - refunded; a row
-- when positive. The exporter's idempotency_overcharged_* gauges sum its rows; a REFUND that
-- covers the excess removes the row, so the gauge falls and the alert resolves.
-- charges, charged_minor, flow_ids, idempotency_keys: of the DEBIT and CAPTURE flows in that
-- currency (flow_ids by id); agent_ids: of those keys' attempts; first_charge_at: of the object's
-- first charge (any currency); last_flow_at: its latest DEBIT, CAPTURE or REFUND in that currency.
CREATE FUNCTION idem.overcharged_objects(p_biz_types text[], p_window interval)
RETURNS TABLE (biz_type text, biz_id text, currency text, charges bigint, charged_minor bigint,
               refunded_minor bigint, owed_minor bigint, flow_ids bigint[],
               idempotency_keys text[], agent_ids text[], first_charge_at timestamptz,
               last_flow_at timestamptz)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
SELECT c.biz_type, c.biz_id, e.currency, e.charges, e.charged_minor, e.refunded_minor,
       e.owed_minor, e.flow_ids, e.idempotency_keys,
       coalesce((SELECT array_agg(DISTINCT a.agent_id ORDER BY a.agent_id)
                   FROM idem.attempts a
                  WHERE a.idempotency_key = ANY(e.idempotency_keys)
                    AND a.agent_id IS NOT NULL),
                '{}'),
       first.created_at, e.last_flow_at
  FROM (SELECT DISTINCT f.biz_type::text AS biz_type, f.biz_id::text AS biz_id
          FROM idem.fund_flows f
         WHERE f.kind IN ('DEBIT', 'CAPTURE')
           AND f.biz_type = ANY(p_biz_types)
           AND f.created_at >= now() - p_window) AS c
 CROSS JOIN LATERAL (SELECT f.id, f.created_at
                       FROM idem.fund_flows f
                      WHERE f.biz_type = c.biz_type AND f.biz_id = c.biz_id
                        AND f.kind IN ('DEBIT', 'CAPTURE')
                      ORDER BY f.id
                      LIMIT 1) AS first
 -- Grouped, so a subplan per object too: its flows by currency.
 CROSS JOIN LATERAL (
        SELECT f.currency::text AS currency,
               count(*) FILTER (WHERE f.kind IN ('DEBIT', 'CAPTURE')) AS charges,
               coalesce(sum(f.amount_minor) FILTER (WHERE f.kind IN ('DEBIT', 'CAPTURE')),
                        0)::bigint AS charged_minor,
               coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = 'REFUND'), 0)::bigint
                   AS refunded_minor,
               (coalesce(sum(f.amount_minor) FILTER (WHERE f.kind IN ('DEBIT', 'CAPTURE')
                                                       AND f.id <> first.id), 0)
                - coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = 'REFUND'), 0))::bigint
                   AS owed_minor,
               array_agg(f.id ORDER BY f.id) FILTER (WHERE f.kind IN ('DEBIT', 'CAPTURE'))
                   AS flow_ids,
               coalesce(array_agg(DISTINCT f.idempotency_key::text)
                            FILTER (WHERE f.kind IN ('DEBIT', 'CAPTURE')
                                      AND f.idempotency_key IS NOT NULL),
                        '{}') AS idempotency_keys,
               max(f.created_at) FILTER (WHERE f.kind IN ('DEBIT', 'CAPTURE', 'REFUND'))
                   AS last_flow_at
          FROM idem.fund_flows f
         WHERE f.biz_type = c.biz_type AND f.biz_id = c.biz_id
         GROUP BY f.currency) AS e
 WHERE e.owed_minor > 0
$$;

COMMENT ON FUNCTION idem.overcharged_objects(text[], interval) IS
    'One row per (business object, currency) charged within the window whose DEBIT+CAPTURE total exceeds its first charge plus its REFUNDs: what is still owed. Disappears once a REFUND covers the excess. The exporter''s idempotency_overcharged_* gauges, the admin app''s Overcharges tab.';

-- One event of a story: an attempt, a transition or a fund flow; the columns that do not apply
-- to its kind are NULL. A column may be added at the end (ALTER TYPE ... ADD ATTRIBUTE), never
-- renamed or removed: the admin app reads these names.
CREATE TYPE idem.story_event AS (
    at              timestamptz,
    event           text,         -- 'attempt', 'transition' or 'fund_flow'
    event_id        bigint,       -- the row's id in its own table
    idempotency_key text,
    biz_type        text,
    biz_id          text,
    trigger_source  text,         -- attempts
    outcome         text,
    from_status     text,         -- transitions
    to_status       text,
    actor           text,
    actor_kind      text,
    reason          text,
    flow_kind       text,         -- fund flows
    amount_minor    bigint,
    currency        text,
    external_ref    text,
    agent_id        text,         -- attempts
    trace_id        text
);

-- The two stories' common part: the given attempts, the transitions of the given keys and the
-- fund flows of the given business objects (p_biz_types[i], p_biz_ids[i]), in time order (at,
-- then attempt < transition < fund_flow, then event_id), the latest p_limit events. Every probe is
-- by index: attempts_pkey, transitions_by_key, fund_flows_by_biz, attempts_by_key.
CREATE FUNCTION idem.story_events(p_attempt_ids bigint[], p_keys text[], p_biz_types text[],
                                  p_biz_ids text[], p_limit integer)
RETURNS SETOF idem.story_event
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
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
$$;

COMMENT ON FUNCTION idem.story_events(bigint[], text[], text[], text[], integer) IS
    'The common part of idem.trace_story and idem.business_object_story: the given attempts, the transitions of the given keys, the fund flows of the given business objects, in time order. Call those two instead.';

CREATE FUNCTION idem.story_limit_checked(p_what text, p_limit integer) RETURNS integer
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION '%: p_limit must be a positive number of events, got %', p_what,
                        coalesce(p_limit::text, 'NULL')
              USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN p_limit;
END
$$;

-- 4. Every attempt of one trace (p_trace_id) or of one agent (p_agent_id), across all its keys,
-- plus the transitions of those keys and the fund flows of those keys' business objects, in time
-- order; the latest p_limit events (of the latest p_limit attempts, when there are more). A lease expiry is the transition PROCESSING -> UNKNOWN made by idem.expire_leases (its
-- reason says so). Found through attempts_by_trace / attempts_by_agent below.
CREATE FUNCTION idem.trace_story(p_trace_id text, p_agent_id text, p_limit integer DEFAULT 5000)
RETURNS SETOF idem.story_event
LANGUAGE plpgsql STABLE
AS $$
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
$$;

COMMENT ON FUNCTION idem.trace_story(text, text, integer) IS
    'Every attempt of one trace or one agent (exactly one of the two given), the transitions of their keys and the fund flows of their business objects, in time order (at, attempt < transition < fund_flow, event_id): the latest p_limit events. The admin app''s Trace audit tab.';

-- 5. The same story for every key of one business object: its records' keys and its flows' keys
-- (records_biz_id_prefix, fund_flows_by_biz), and the keys that tried it within the same traces
-- (attempts_by_trace: a retry refused under a new key leaves an attempt but no record), all their
-- attempts, their transitions and all the object's fund flows (also those no key recorded). The
-- admin app's timeline reads it.
CREATE FUNCTION idem.business_object_story(p_biz_type text, p_biz_id text,
                                           p_limit integer DEFAULT 5000)
RETURNS SETOF idem.story_event
LANGUAGE plpgsql STABLE
AS $$
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
$$;

COMMENT ON FUNCTION idem.business_object_story(text, text, integer) IS
    'The story of one business object: every attempt of each of its keys, their transitions and all its fund flows, in time order (at, attempt < transition < fund_flow, event_id): the latest p_limit events. The admin app''s timeline.';

-- The trace audit's entry points at 10M attempts. Partial: most attempts carry no trace or agent
-- in some deployments, and those cost the write path nothing here (bench/protocol, before and
-- after, in docs/benchmarks.md).
CREATE INDEX attempts_by_trace ON idem.attempts (trace_id) WHERE trace_id IS NOT NULL;
CREATE INDEX attempts_by_agent ON idem.attempts (agent_id, created_at) WHERE agent_id IS NOT NULL;

ALTER TYPE idem.story_event OWNER TO idem_owner;

-- As 009 requires of every later function: owned by idem_owner, nothing for PUBLIC, then exactly
-- the contract's grants (shared/src/migrations.cpp, expectedFunctionGrants, checks them).
ALTER FUNCTION idem.money_moved_without_success(text[], interval, interval) OWNER TO idem_owner;
ALTER FUNCTION idem.success_without_money_moved(text[], interval, interval) OWNER TO idem_owner;
ALTER FUNCTION idem.overcharged_objects(text[], interval) OWNER TO idem_owner;
ALTER FUNCTION idem.story_events(bigint[], text[], text[], text[], integer) OWNER TO idem_owner;
ALTER FUNCTION idem.story_limit_checked(text, integer) OWNER TO idem_owner;
ALTER FUNCTION idem.trace_story(text, text, integer) OWNER TO idem_owner;
ALTER FUNCTION idem.business_object_story(text, text, integer) OWNER TO idem_owner;
-- PUBLIC's EXECUTE, which CREATE FUNCTION gave each of them, off every idem function (the others
-- have none already).
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA idem FROM PUBLIC;

-- The exporter (idem_reader) and the admin app (idem_operator). None is SECURITY DEFINER: they
-- read as their caller, who has SELECT on the tables; the stories call the two helpers, which
-- their callers must therefore be able to execute.
GRANT EXECUTE ON FUNCTION
    idem.money_moved_without_success(text[], interval, interval),
    idem.success_without_money_moved(text[], interval, interval),
    idem.overcharged_objects(text[], interval),
    idem.story_events(bigint[], text[], text[], text[], integer),
    idem.story_limit_checked(text, integer),
    idem.trace_story(text, text, integer),
    idem.business_object_story(text, text, integer)
TO idem_reader, idem_operator;
