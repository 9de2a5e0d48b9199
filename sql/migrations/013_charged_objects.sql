-- The money questions at the exporter's default window: 24 hours of a busy ledger is
-- about 55,000 charged business objects, and 012 probed the other table by index once or twice for
-- each of them (a second or more per question at 10M rows, docs/benchmarks.md). Here each question
-- first sets aside, in one hash join, the objects that are plainly fine, and probes only the rest:
--   * idem.charged_objects: one row per business object ever charged (DEBIT or CAPTURE), kept by
--     the database as flows are recorded; overcharged_objects reads only the objects charged more
--     than once, through a partial index, whatever the window;
--   * money_moved_without_success: the window's charged objects less those with a SUCCESS record
--     updated since shortly before the window (a hash anti join), then the probe as in 012;
--   * success_without_money_moved: the window's SUCCESS records less those whose object was
--     charged since shortly before the window, then the probe as in 012.
-- The set-aside is only ever a shortcut: what it lets through is answered by the same probes as
-- before, so the answers are 012's exactly (tests/shared/tst_money_questions.cpp compares them
-- with a whole-table definition). Signatures, columns and grants are unchanged.
--
-- They are PL/pgSQL now, with JIT and parallel workers off for their run (SET on the function),
-- whoever calls them: a day's window costs the planner over jit_above_cost, and compiling the
-- plan took longer than running it (350 ms of 500 at 10M rows, bench/money), which only the
-- exporter's own sessions had turned off, and not behind a pooler, where it may not set anything
-- for the session. A SQL function with SET is no longer inlined, which 012 relied on; RETURN
-- QUERY plans each statement with the call's values (a custom plan), so the window still picks
-- its indexes.

-- What every business object has been charged: charges counts its DEBIT and CAPTURE flows,
-- last_charge_at is the latest one's created_at. A trigger on idem.fund_flows keeps it, in the
-- same transaction as the flow, so a reader sees both or neither; concurrent flows of one object
-- serialise on its row (INSERT ... ON CONFLICT DO UPDATE). The ledger is append-only, so a row only
-- grows. Rows loaded with triggers off (pg_restore --disable-triggers, session_replication_role =
-- replica) are not counted: run idem.recount_charged_objects() after such a load.
CREATE TABLE idem.charged_objects (
    biz_type        idem.name_text NOT NULL,
    biz_id          idem.name_text NOT NULL,
    charges         integer     NOT NULL CHECK (charges > 0),
    last_charge_at  timestamptz NOT NULL,
    CONSTRAINT charged_objects_pkey PRIMARY KEY (biz_type, biz_id)
);

-- The only objects that can owe anything: charged twice or more (docs/contract/metrics.md, v2).
CREATE INDEX charged_objects_repeated ON idem.charged_objects (last_charge_at) WHERE charges > 1;

COMMENT ON TABLE idem.charged_objects IS
    'One row per business object with a DEBIT or CAPTURE flow: how many, and when the latest. Kept by the trigger fund_flows_count_charges; idem.overcharged_objects reads it.';

CREATE FUNCTION idem.count_charge() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO idem.charged_objects AS o (biz_type, biz_id, charges, last_charge_at)
    VALUES (NEW.biz_type, NEW.biz_id, 1, NEW.created_at)
    ON CONFLICT (biz_type, biz_id) DO UPDATE
       SET charges = o.charges + 1,
           last_charge_at = greatest(o.last_charge_at, EXCLUDED.last_charge_at);
    RETURN NULL;
END
$$;

-- Rebuilds idem.charged_objects from the ledger, for a database loaded with triggers off. Takes
-- the ledger's SHARE ROW EXCLUSIVE lock (flows wait, readers do not) for the time it runs.
CREATE FUNCTION idem.recount_charged_objects() RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_count bigint;
BEGIN
    LOCK TABLE idem.fund_flows IN SHARE ROW EXCLUSIVE MODE;
    DELETE FROM idem.charged_objects;
    INSERT INTO idem.charged_objects (biz_type, biz_id, charges, last_charge_at)
    SELECT f.biz_type, f.biz_id, count(*), max(f.created_at)
      FROM idem.fund_flows AS f
     WHERE f.kind IN ('DEBIT', 'CAPTURE')
     GROUP BY f.biz_type, f.biz_id;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

-- The trigger first, then the count, in this migration's one transaction: CREATE TRIGGER's lock
-- keeps every flow out until the commit, so none is counted twice or missed.
CREATE TRIGGER fund_flows_count_charges
    AFTER INSERT ON idem.fund_flows
    FOR EACH ROW WHEN (NEW.kind IN ('DEBIT', 'CAPTURE'))
    EXECUTE FUNCTION idem.count_charge();
SELECT idem.recount_charged_objects();

-- 1. As in 012. Set aside: the objects with a SUCCESS record updated since an hour before the
-- window (records_by_updated, one hash). Whatever is left, a handful on a healthy day, is probed.
CREATE OR REPLACE FUNCTION idem.money_moved_without_success(
    p_biz_types text[], p_window interval, p_grace interval)
RETURNS TABLE (
    biz_type text, biz_id text,
    first_charge_id bigint, first_charge_at timestamptz, first_charge_ref text,
    charges bigint, charged_minor bigint, currency text,
    record_key text, record_status text, record_version integer,
    record_lease_expires_at timestamptz)
LANGUAGE plpgsql STABLE SET jit = off SET max_parallel_workers_per_gather = 0
AS $$ BEGIN RETURN QUERY
    SELECT u.biz_type::text, u.biz_id::text, c.id::bigint, c.created_at::timestamptz,
           c.ref::text, c.charges::bigint, c.total::bigint, c.currency::text, r.key::text,
           r.status::text, r.version::integer, r.lease_expires_at::timestamptz
      FROM (SELECT DISTINCT w.biz_type, w.biz_id
              FROM (SELECT f.biz_type::text AS biz_type, f.biz_id::text AS biz_id
                      FROM idem.fund_flows AS f
                     WHERE f.kind IN ('DEBIT', 'CAPTURE')
                       AND f.biz_type = ANY(p_biz_types)
                       AND f.created_at >= now() - p_window
                       AND f.created_at < now() - p_grace) AS w
              LEFT JOIN (SELECT p.biz_type::text AS biz_type, p.biz_id::text AS biz_id
                           FROM idem.records AS p
                          WHERE p.updated_at >= now() - p_window - interval '1 hour'
                            AND p.status = 'SUCCESS') AS paid
                     ON paid.biz_type = w.biz_type AND paid.biz_id = w.biz_id
             WHERE paid.biz_id IS NULL
            OFFSET 0) AS u
     -- Its first charge by id, with the count of its charges and their total in that one's
     -- currency (window aggregates run before the LIMIT), and its most recently updated record.
     CROSS JOIN LATERAL (SELECT f.id, f.created_at, f.external_ref::text AS ref,
                                f.currency::text AS currency, count(*) OVER () AS charges,
                                (sum(f.amount_minor) OVER (PARTITION BY f.currency))::bigint AS total
                           FROM idem.fund_flows AS f
                          WHERE f.kind IN ('DEBIT', 'CAPTURE')
                            AND f.biz_type = u.biz_type AND f.biz_id = u.biz_id
                          ORDER BY f.id
                          LIMIT 1) AS c
      LEFT JOIN LATERAL (SELECT l.idempotency_key::text AS key, l.status::text AS status, l.version,
                                l.lease_expires_at
                           FROM idem.records AS l
                          WHERE l.biz_type = u.biz_type AND (l.biz_id COLLATE "C") = u.biz_id
                          ORDER BY l.updated_at DESC, l.idempotency_key DESC
                          LIMIT 1) AS r ON true
     -- Two probes kept as subplans by their OFFSET 0 (see 012): a SUCCESS record, a SUCCESS tombstone.
     WHERE NOT EXISTS (SELECT FROM idem.records AS x
                        WHERE x.status = 'SUCCESS' AND x.biz_type = u.biz_type
                          AND x.biz_id = u.biz_id OFFSET 0)
       AND NOT EXISTS (SELECT FROM idem.retired_keys AS t
                        WHERE t.status = 'SUCCESS' AND t.biz_type = u.biz_type
                          AND t.biz_id = u.biz_id OFFSET 0);
END
$$;

-- 2. As in 012. Set aside: the records whose object has a DEBIT or CAPTURE flow created since an
-- hour before the window (the BRIN on created_at, one hash). The window's records are read by
-- records_by_updated alone, behind an OFFSET 0: with the biz types next to them the planner would
-- AND that index with records_one_live_per_biz's whole run of the biz type (a million pages).
CREATE OR REPLACE FUNCTION idem.success_without_money_moved(
    p_biz_types text[], p_window interval, p_grace interval)
RETURNS TABLE (
    biz_type text, biz_id text, idempotency_key text, version integer,
    succeeded_at timestamptz, agent_id text)
LANGUAGE plpgsql STABLE SET jit = off SET max_parallel_workers_per_gather = 0
AS $$ BEGIN RETURN QUERY
    SELECT u.biz_type::text, u.biz_id::text, u.idempotency_key::text, u.version::integer,
           u.updated_at::timestamptz, a.agent_id::text
      FROM (SELECT w.*
              FROM (SELECT x.biz_type, x.biz_id, x.idempotency_key, x.version, x.updated_at
                      FROM idem.records AS x
                     WHERE x.updated_at >= now() - p_window
                       AND x.updated_at < now() - p_grace
                       AND x.status = 'SUCCESS'
                    OFFSET 0) AS w
              LEFT JOIN (SELECT f.biz_type, f.biz_id
                           FROM idem.fund_flows AS f
                          WHERE f.created_at >= now() - p_window - interval '1 hour'
                            AND f.kind IN ('DEBIT', 'CAPTURE')) AS charged
                     ON charged.biz_type = w.biz_type AND charged.biz_id = w.biz_id
             WHERE charged.biz_id IS NULL
               AND w.biz_type = ANY(p_biz_types)
            OFFSET 0) AS u
      LEFT JOIN LATERAL (SELECT a.agent_id
                           FROM idem.attempts a
                          WHERE a.idempotency_key = u.idempotency_key
                          ORDER BY a.id
                          LIMIT 1) AS a ON true
     WHERE NOT EXISTS (SELECT FROM idem.fund_flows f
                        WHERE f.biz_type = u.biz_type AND f.biz_id = u.biz_id
                          AND f.kind IN ('DEBIT', 'CAPTURE')
                       OFFSET 0);
END
$$;

-- 3. As in 012, for the objects charged more than once whose latest charge is in the window
-- (charged_objects_repeated): every flow of each (fund_flows_by_biz), the first charge by id,
-- then per currency what is owed. The window is checked again on the flows themselves, so a
-- count that is too high or too recent (a flow aged by hand) costs a probe, never a wrong row.
CREATE OR REPLACE FUNCTION idem.overcharged_objects(
    p_biz_types text[], p_window interval)
RETURNS TABLE (
    biz_type text, biz_id text, currency text,
    charges bigint, charged_minor bigint, refunded_minor bigint, owed_minor bigint,
    flow_ids bigint[], idempotency_keys text[], agent_ids text[],
    first_charge_at timestamptz, last_flow_at timestamptz)
LANGUAGE plpgsql STABLE SET jit = off SET max_parallel_workers_per_gather = 0
AS $$ BEGIN RETURN QUERY
    SELECT t.biz_type::text, t.biz_id::text, t.currency::text, t.charges::bigint,
           t.charged::bigint, t.refunded::bigint, (t.beyond_first - t.refunded)::bigint,
           t.flow_ids::bigint[], t.keys::text[],
           coalesce((SELECT array_agg(DISTINCT a.agent_id ORDER BY a.agent_id)
                       FROM idem.attempts a
                      WHERE a.idempotency_key = ANY(t.keys) AND a.agent_id IS NOT NULL), '{}'),
           t.first_at::timestamptz, t.last_at::timestamptz
      FROM (SELECT g.biz_type, g.biz_id, g.currency,
                   count(*) FILTER (WHERE g.charge) AS charges,
                   coalesce(sum(g.amount_minor) FILTER (WHERE g.charge), 0)::bigint AS charged,
                   coalesce(sum(g.amount_minor) FILTER (WHERE g.kind = 'REFUND'), 0)::bigint
                       AS refunded,
                   coalesce(sum(g.amount_minor) FILTER (WHERE g.charge AND g.id <> g.first_id),
                            0)::bigint AS beyond_first,
                   array_agg(g.id ORDER BY g.id) FILTER (WHERE g.charge) AS flow_ids,
                   coalesce(array_agg(DISTINCT g.idempotency_key)
                                FILTER (WHERE g.charge AND g.idempotency_key IS NOT NULL),
                            '{}') AS keys,
                   min(g.first_at) AS first_at,
                   max(g.created_at) FILTER (WHERE g.charge OR g.kind = 'REFUND') AS last_at,
                   bool_or(g.latest_charge_at >= now() - p_window) AS charged_in_window
              FROM (SELECT f.biz_type::text AS biz_type, f.biz_id::text AS biz_id,
                           f.currency::text AS currency, f.kind::text AS kind, f.id,
                           f.amount_minor::bigint AS amount_minor,
                           f.idempotency_key::text AS idempotency_key, f.created_at,
                           f.kind IN ('DEBIT', 'CAPTURE') AS charge,
                           first_value(f.id) OVER o AS first_id,
                           first_value(f.created_at) OVER o AS first_at,
                           max(f.created_at) FILTER (WHERE f.kind IN ('DEBIT', 'CAPTURE'))
                               OVER (PARTITION BY f.biz_type, f.biz_id) AS latest_charge_at
                      FROM idem.charged_objects AS co
                      JOIN idem.fund_flows AS f
                        ON f.biz_type = co.biz_type AND f.biz_id = co.biz_id
                     WHERE co.charges > 1
                       AND co.last_charge_at >= now() - p_window
                       AND co.biz_type = ANY(p_biz_types)
                    WINDOW o AS (PARTITION BY f.biz_type, f.biz_id
                                 ORDER BY f.kind IN ('DEBIT', 'CAPTURE') DESC, f.id
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)) AS g
             GROUP BY g.biz_type, g.biz_id, g.currency) AS t
     WHERE t.beyond_first - t.refunded > 0
       AND t.charged_in_window;
END
$$;

-- As 009 requires: owned by idem_owner, nothing for PUBLIC. The trigger and the recount are the
-- owner's alone (the trigger runs inside idem.record_fund_flow, as the owner); the table is read
-- by whoever reads the ledger.
ALTER TABLE idem.charged_objects OWNER TO idem_owner;
ALTER FUNCTION idem.count_charge() OWNER TO idem_owner;
ALTER FUNCTION idem.recount_charged_objects() OWNER TO idem_owner;
REVOKE EXECUTE ON FUNCTION idem.count_charge(), idem.recount_charged_objects() FROM PUBLIC;
GRANT SELECT ON idem.charged_objects TO idem_reader, idem_operator, idem_reconciler;
