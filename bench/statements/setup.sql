-- The ledger a statement of bench/statements/generate.py meets: records for 90% of its charges,
-- made the way money/generate.sql makes them (one INSERT ... SELECT generate_series a table, as the
-- owner with the triggers off: rows as the protocol would have left them, secondary indexes
-- dropped before the load and built after it).
-- Usage: psql -v lines=1000000 -v gateway=stripe-bench [-v unknown_pct=30 -v callback_pct=30]
--        -f setup.sql
--
-- A charge on line i (i % 20 <= 16) has, by its share u = ((i / 20) % 10) * 10 + (i / 200) % 10
-- (0 to 99, spread evenly over the file), with U = unknown_pct and C = callback_pct (default 30 and
-- 30):
--   u < U            an UNKNOWN record (the call timed out): the line resolves it SUCCESS
--   U <= u < U + C   a SUCCESS record whose DEBIT a callback already recorded under its charge id
--   U + C <= u < 90  a SUCCESS record without a flow: the line records it
--   u >= 90          no record: the line stays unmatched                                 (10%)
-- payment records, key ord-<i>-pay, business object order:<i>, request {amount_minor, currency}
-- as the file charges it, except every 250th (i % 250 = 1), which asked one minor unit more: a
-- mismatch. The gateway carries payment, so the charges without a key (i % 20 = 5) match by their
-- business object (those with a recorded flow: by its charge id).
\set ON_ERROR_STOP on
SET session_replication_role = replica;
SET maintenance_work_mem = '512MB';
SET synchronous_commit = off;
\if :{?unknown_pct}
\else
\set unknown_pct 30
\endif
\if :{?callback_pct}
\else
\set callback_pct 30
\endif

SELECT idem.declare_gateway(:'gateway', '{payment}', interval '3 days', false);

SELECT 'DROP INDEX ' || string_agg('idem.' || quote_ident(indexname), ', ') AS drop_indexes,
       string_agg(indexdef, '; ') AS create_indexes
  FROM pg_indexes
 WHERE schemaname = 'idem' AND tablename IN ('records', 'attempts', 'transitions', 'fund_flows')
   AND indexname NOT IN (SELECT conname FROM pg_constraint) \gset
:drop_indexes;

CREATE TEMP TABLE g AS
SELECT i, u,
       timestamptz '2026-11-30 00:00:00+00' + (i::numeric * 86400 / (:lines + 1) - 5) * interval '1 second' AS t,
       CASE WHEN i % 100 < 80 THEN 'USD' WHEN i % 100 < 95 THEN 'EUR' ELSE 'JPY' END AS currency,
       500 + (i::bigint * 7919) % 99500 AS amount,
       CASE WHEN u < :unknown_pct THEN 'UNKNOWN' ELSE 'SUCCESS' END AS status
  FROM generate_series(1, :lines) AS i,
       LATERAL (SELECT ((i / 20) % 10) * 10 + (i / 200) % 10 AS u) AS x
 WHERE i % 20 <= 16 AND u < 90;

INSERT INTO idem.records (idempotency_key, biz_type, biz_id, tool, request_hash, status, version,
                          lease_expires_at, request_payload, response_payload, attempt_count,
                          created_at, updated_at)
SELECT 'ord-' || i || '-pay', 'payment', 'order:' || i, 'stripe.charge', md5(i::text), status, 2,
       t + interval '30 seconds',
       jsonb_build_object('amount_minor', amount + (i % 250 = 1)::int, 'currency', currency),
       CASE WHEN status = 'SUCCESS' THEN '{"ok": true}'::jsonb END, 1, t,
       t + interval '1 second'
  FROM g;

INSERT INTO idem.attempts (idempotency_key, biz_type, biz_id, tool, trigger_source, outcome,
                           request_hash, agent_id, trace_id, created_at)
SELECT 'ord-' || i || '-pay', 'payment', 'order:' || i, 'stripe.charge', 'llm', 'executed',
       md5(i::text), 'agent-' || (i % 2000), 'trace-' || (i / 4), t
  FROM g;

INSERT INTO idem.transitions (idempotency_key, from_status, to_status, version, actor, actor_kind,
                              created_at)
SELECT 'ord-' || i || '-pay', x.f, x.s, x.v, 'bench', 'system', x.c
  FROM g, LATERAL (VALUES (NULL::text, 'PROCESSING', 1, g.t),
                          ('PROCESSING', g.status, 2, g.t + interval '1 second')) AS x(f, s, v, c);

-- The callbacks that came before the statement: the DEBIT under the charge id, recorded by ledger.
INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, external_ref,
                             idempotency_key, duplicate_of, created_at, recorded_by, recorded_login)
SELECT 'payment', 'order:' || i, 'DEBIT', amount, currency, 'ch_3Qb' || lpad(i::text, 12, '0'),
       'ord-' || i || '-pay', NULL, t + interval '2 seconds', 'ledger', 'bench'
  FROM g
 WHERE u >= :unknown_pct AND u < :unknown_pct + :callback_pct AND i % 250 <> 1;
INSERT INTO idem.ledger_objects (biz_type, biz_id, touched_at)
SELECT biz_type, biz_id, min(created_at) FROM idem.fund_flows GROUP BY 1, 2
    ON CONFLICT DO NOTHING;

:create_indexes;
\ir ../recount_charges.sql
VACUUM ANALYZE idem.records, idem.attempts, idem.transitions, idem.fund_flows, idem.ledger_objects;
