-- Fills the idem tables with history for the exporter benchmark, fast: INSERT ... SELECT
-- generate_series as the owner, with triggers off (session_replication_role = replica: the rows
-- are written as the protocol would have left them, history included) and the secondary indexes
-- built after the load. Usage: psql -v attempts=10000000 -v per_day=100000 -f generate.sql
--
-- Shape, per business operation (records = 0.77 x attempts): one record, two transitions
-- (creation, then SUCCESS 92% / FAILED 8%; 50 recent ones left UNKNOWN: the unsettled set
-- is small and does not grow with history), about 1.3 attempts with realistic
-- sources and outcomes, and for a SUCCESS payment one DEBIT fund flow (0.5% charged twice).
-- Time: a steady :per_day attempts a day, ending now, so that a bigger table is a longer history
-- at the same traffic, as in production.
\set ON_ERROR_STOP on
SET session_replication_role = replica;
SET maintenance_work_mem = '512MB';
SET synchronous_commit = off;

CREATE TEMP TABLE saved_indexes AS
SELECT indexname, indexdef FROM pg_indexes
 WHERE schemaname = 'idem' AND tablename IN ('records', 'attempts', 'transitions', 'fund_flows')
   AND indexname NOT IN (SELECT conname FROM pg_constraint);
DO $$ DECLARE r record; BEGIN
  FOR r IN SELECT indexname FROM saved_indexes LOOP EXECUTE format('DROP INDEX idem.%I', r.indexname); END LOOP;
END $$;

-- (In bigint: 77 times 28M attempts or more is past an integer.)
\set ops (:attempts::bigint * 77 / 100)
\set span_seconds (:attempts::numeric / :per_day * 86400)

-- The history's past days as a database that has run for that long has them, one partition a day
-- (idem.prepare_history_partitions made today's and the days ahead at migrate), not all of it in
-- the DEFAULT partition, which holds only what no day covers.
-- (psql does not put variables into a dollar-quoted body: the span goes in as a setting.)
SELECT set_config('bench.span_seconds', (:span_seconds)::text, false) \gset
DO $$ DECLARE t text; d date; BEGIN
  FOREACH t IN ARRAY ARRAY['attempts', 'transitions'] LOOP
    FOR d IN SELECT g::date FROM generate_series(
                 ((now() - (current_setting('bench.span_seconds')::numeric + 86400)
                   * interval '1 second') AT TIME ZONE 'UTC')::date,
                 (now() AT TIME ZONE 'UTC')::date - 1, interval '1 day') AS g LOOP
      CONTINUE WHEN to_regclass('idem.' || t || '_p' || to_char(d, 'YYYYMMDD')) IS NOT NULL;
      EXECUTE format('CREATE TABLE idem.%I PARTITION OF idem.%I FOR VALUES FROM (%L) TO (%L)',
                     t || '_p' || to_char(d, 'YYYYMMDD'), t, d::timestamp AT TIME ZONE 'UTC',
                     (d + 1)::timestamp AT TIME ZONE 'UTC');
    END LOOP;
  END LOOP;
END $$;

INSERT INTO idem.records (idempotency_key, biz_type, biz_id, tool, request_hash, status, version,
                          lease_expires_at, request_payload, response_payload, attempt_count,
                          created_at, updated_at)
SELECT 'h-' || i,
       CASE WHEN i % 10 < 6 THEN 'payment' WHEN i % 10 < 8 THEN 'refund' ELSE 'coupon' END,
       'o-' || i, 'pay', md5(i::text),
       CASE WHEN i > :ops - 500 AND i % 10 = 9 THEN 'UNKNOWN' WHEN i % 100 < 92 THEN 'SUCCESS' ELSE 'FAILED' END,
       2, t + interval '30 seconds', '{"amount": 2990}', '{"ok": true}', 1, t, t + interval '1 second'
  FROM (SELECT i, now() - (:span_seconds * (1 - i::numeric / :ops)) * interval '1 second' AS t
          FROM generate_series(1, :ops) AS i) AS g;

INSERT INTO idem.transitions (idempotency_key, from_status, to_status, version, actor, actor_kind, created_at)
SELECT idempotency_key, f, s, v, 'bench', 'system', c
  FROM (SELECT idempotency_key, created_at, status, updated_at FROM idem.records ORDER BY created_at) AS r,
       LATERAL (VALUES (NULL::text, 'PROCESSING', 1, r.created_at),
                       ('PROCESSING', r.status, 2, r.updated_at)) AS x(f, s, v, c);

INSERT INTO idem.attempts (idempotency_key, biz_type, biz_id, tool, trigger_source, outcome,
                           request_hash, agent_id, trace_id, created_at)
SELECT 'h-' || r, CASE WHEN r % 10 < 6 THEN 'payment' WHEN r % 10 < 8 THEN 'refund' ELSE 'coupon' END,
       'o-' || r, 'pay',
       CASE WHEN i % 100 < 75 THEN 'initial' WHEN i % 100 < 81 THEN 'llm' WHEN i % 100 < 86 THEN 'framework'
            WHEN i % 100 < 94 THEN 'http' ELSE 'callback' END,
       CASE WHEN i % 100 < 77 THEN 'executed' WHEN i % 100 < 92 THEN 'replayed' WHEN i % 100 < 97 THEN 'in_progress'
            WHEN i % 100 < 99 THEN 'payload_mismatch' ELSE 'rejected' END,
       md5(r::text), 'agent-' || (i % 16), 'trace-' || i,
       now() - (:span_seconds * (1 - i::numeric / :attempts)) * interval '1 second'
  FROM (SELECT i, greatest(1, i * 77 / 100) AS r FROM generate_series(1, :attempts::bigint) AS i) AS g;

INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, external_ref, idempotency_key, duplicate_of, created_at, recorded_by)
SELECT biz_type, biz_id, 'DEBIT', 2990, 'CNY', 'gw-' || idempotency_key, idempotency_key, NULL, updated_at, 'ledger'
  FROM idem.records WHERE biz_type = 'payment' AND status = 'SUCCESS' ORDER BY updated_at;
INSERT INTO idem.fund_flows (biz_type, biz_id, kind, amount_minor, currency, external_ref, idempotency_key, duplicate_of, created_at, recorded_by)
SELECT biz_type, biz_id, 'DEBIT', 2990, 'CNY', 'gw2-' || idempotency_key, idempotency_key, id, created_at + interval '2 seconds', 'ledger'
  FROM idem.fund_flows WHERE id % 200 = 0 ORDER BY id;

DO $$ DECLARE r record; BEGIN
  -- A partitioned table's index reads "ON ONLY": made so, it would stay invalid and leave every
  -- partition without it.
  FOR r IN SELECT replace(indexdef, ' ON ONLY ', ' ON ') AS indexdef FROM saved_indexes LOOP
    EXECUTE r.indexdef;
  END LOOP;
END $$;
SET session_replication_role = origin;
\ir ../recount_charges.sql
VACUUM ANALYZE idem.records, idem.attempts, idem.transitions, idem.fund_flows;
SELECT (SELECT count(*) FROM idem.attempts) AS attempts, (SELECT count(*) FROM idem.records) AS records,
       (SELECT count(*) FROM idem.transitions) AS transitions, (SELECT count(*) FROM idem.fund_flows) AS fund_flows;
