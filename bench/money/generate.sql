-- Fills the idem tables for the money questions' benchmark (bench/money/bench_money.cpp): one
-- INSERT ... SELECT generate_series statement per table, as the owner with the triggers off
-- (session_replication_role = replica: rows as the protocol would have left them), the secondary
-- indexes dropped before the load and built after it.
-- Usage: psql -v n=10000000 -v per_day=100000 -f generate.sql
--
-- Shape: :n records and :n attempts (one per record; agent 'agent-' || i % 20000, so an agent
-- has n / 20000 attempts; trace 'trace-' || i / 4, four keys a trace), one creation transition
-- per record and one to its final status, and a DEBIT for each SUCCESS payment (60% of the
-- records are payments). At a steady :per_day records a day ending now. The money questions'
-- matches, a few hundred in any day: every 1000th payment is UNKNOWN with its DEBIT (money moved
-- without SUCCESS), every 1000th (offset 500) SUCCESS without a DEBIT, every 500th (offset 250)
-- charged twice, half of those refunded.
\set ON_ERROR_STOP on
SET session_replication_role = replica;
SET maintenance_work_mem = '512MB';
SET synchronous_commit = off;

-- The secondary indexes, as one DROP now and their definitions for after the load.
SELECT 'DROP INDEX ' || string_agg('idem.' || quote_ident(indexname), ', ') AS drop_indexes,
       string_agg(indexdef, '; ') AS create_indexes
  FROM pg_indexes
 WHERE schemaname = 'idem' AND tablename IN ('records', 'attempts', 'transitions', 'fund_flows')
   AND indexname NOT IN (SELECT conname FROM pg_constraint) \gset
:drop_indexes;

\set span_seconds (:n::numeric / :per_day * 86400)

CREATE TEMP TABLE g AS
SELECT i,
       now() - (:span_seconds * (1 - i::numeric / :n)) * interval '1 second' AS t,
       CASE WHEN i % 10 < 6 THEN 'payment' WHEN i % 10 < 8 THEN 'refund' ELSE 'coupon' END AS biz,
       CASE WHEN i % 10 < 6 AND i % 1000 = 0 THEN 'UNKNOWN'
            WHEN i % 1000 = 500 THEN 'SUCCESS'
            WHEN i % 100 < 92 THEN 'SUCCESS' ELSE 'FAILED' END AS status
  FROM generate_series(1, :n) AS i;

INSERT INTO idem.records (idempotency_key, biz_type, biz_id, tool, request_hash, status, version,
                          lease_expires_at, request_payload, response_payload, attempt_count,
                          created_at, updated_at)
SELECT 'h-' || i, biz, 'o-' || i, 'pay', md5(i::text), status, 2, t + interval '30 seconds',
       '{"amount": 2990}', '{"ok": true}', 1, t, t + interval '1 second'
  FROM g;

INSERT INTO idem.attempts (idempotency_key, biz_type, biz_id, tool, trigger_source, outcome,
                           request_hash, agent_id, trace_id, created_at)
SELECT 'h-' || i, biz, 'o-' || i, 'pay', CASE WHEN i % 4 = 0 THEN 'initial' ELSE 'llm' END,
       'executed', md5(i::text), 'agent-' || (i % 20000), 'trace-' || (i / 4), t
  FROM g;

INSERT INTO idem.transitions (idempotency_key, from_status, to_status, version, actor, actor_kind,
                              created_at)
SELECT 'h-' || i, x.f, x.s, x.v, 'bench', 'system', x.c
  FROM g, LATERAL (VALUES (NULL::text, 'PROCESSING', 1, g.t),
                          ('PROCESSING', g.status, 2, g.t + interval '1 second')) AS x(f, s, v, c);

INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, external_ref,
                             idempotency_key, duplicate_of, created_at, recorded_by)
SELECT biz, 'o-' || i, 'DEBIT', 2990, 'CNY', 'gw-' || i, 'h-' || i, NULL, t + interval '500 ms',
       'ledger'
  FROM g
 WHERE biz = 'payment' AND (status = 'UNKNOWN' OR (status = 'SUCCESS' AND i % 1000 <> 500));

-- The duplicates (duplicate_of the first DEBIT), and the refund of every other one.
INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, external_ref,
                             idempotency_key, duplicate_of, created_at, recorded_by)
SELECT f.biz_type, f.biz_id, 'DEBIT', 2990, 'CNY', 'gw-dup-' || g.i, f.idempotency_key, f.id,
       g.t + interval '4 seconds', 'ledger'
  FROM g JOIN idem.fund_flows f ON f.external_ref = 'gw-' || g.i
 WHERE g.i % 500 = 250;
INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, external_ref,
                             idempotency_key, duplicate_of, created_at, recorded_by)
SELECT f.biz_type, f.biz_id, 'REFUND', 2990, 'CNY', 'gw-ref-' || g.i, f.idempotency_key, NULL,
       g.t + interval '60 seconds', 'ledger'
  FROM g JOIN idem.fund_flows f ON f.external_ref = 'gw-' || g.i
 WHERE g.i % 1000 = 250;

:create_indexes;
\ir ../recount_charges.sql
VACUUM ANALYZE idem.records, idem.attempts, idem.transitions, idem.fund_flows;
