-- The floor of a statement's import: the least any import of the file can cost that keeps what
-- idemctl import-statement keeps, measured on the ledger bench/statements/setup.sql made. In one
-- transaction, as the import: the file parsed by COPY; every line matched at once (hash joins
-- against the whole ledger: by the key the charge carries, else by the business object; the flow
-- a callback recorded, by the gateway's reference; the amount against the request); the new flows
-- written; each UNKNOWN record a charge line answers decided (its update and its transition, with
-- the line as evidence); every line written with what it was found to be and its fields. Into
-- copies of the shipped tables with every index (LIKE ... INCLUDING ALL: no triggers, no foreign
-- keys), so that the import measured after it meets the ledger as it was.
-- Not done, which the import must: the lines already held or repeated, the lines that depend on
-- each other, the ledger's triggers (the objects touched, the charges counted, the state machine).
-- Usage: psql -v file=FILE.csv -v gateway=NAME -f floor.sql (as the owner; \timing prints each step)
\set ON_ERROR_STOP on
SET client_min_messages = warning;
DROP TABLE IF EXISTS floor_lines, floor_flows, floor_records, floor_transitions;
CREATE TABLE floor_lines (LIKE idem.statement_lines INCLUDING ALL);
CREATE TABLE floor_flows (LIKE idem.fund_flows INCLUDING ALL);
INSERT INTO floor_flows OVERRIDING SYSTEM VALUE SELECT * FROM idem.fund_flows;
SELECT FROM setval(pg_get_serial_sequence('floor_flows', 'id'),
                   (SELECT coalesce(max(id), 0) + 1 FROM floor_flows), false);
CREATE TABLE floor_records (LIKE idem.records INCLUDING ALL);
INSERT INTO floor_records SELECT * FROM idem.records;
CREATE TABLE floor_transitions (LIKE idem.transitions INCLUDING ALL);
VACUUM ANALYZE floor_flows, floor_records;
CHECKPOINT;

\timing on
\echo floor: begin
BEGIN;
CREATE TEMP TABLE staging (
  balance_transaction_id text, created_utc timestamp, available_on_utc timestamp, currency text,
  gross numeric, fee numeric, net numeric, reporting_category text, source_id text,
  description text, charge_id text, payment_intent_id text, customer_facing_amount numeric,
  payment_method_type text, card_brand text, idempotency_key text, biz_id text) ON COMMIT DROP;
\echo floor: the file parsed
-- (psql does not expand variables in \copy: the command is built first, then run)
\set copy_file '\\copy staging FROM ' :'file' ' WITH (FORMAT csv, HEADER true)'
:copy_file
\echo floor: every line matched at once
ANALYZE staging;
-- (The line's fields stay in staging until the line is written, as the import keeps them in its
-- batch table: carried through the matching they would cost more than all of it.)
CREATE TEMP TABLE matched ON COMMIT DROP AS
SELECT s.balance_transaction_id AS line_id, row_number() OVER () AS source_line,
       s.reporting_category AS category, x.kind, x.amount_minor, upper(s.currency) AS currency,
       (s.fee * x.scale)::bigint AS fee_minor, s.created_utc AT TIME ZONE 'UTC' AS booked_at,
       s.source_id AS gateway_ref, s.idempotency_key, s.biz_id,
       coalesce(r.idempotency_key, rb.idempotency_key) AS record_key,
       coalesce(r.biz_type, rb.biz_type) AS rec_type, coalesce(r.biz_id, rb.biz_id) AS rec_biz_id,
       coalesce(r.status, rb.status) AS record_status,
       (coalesce(r.request_payload, rb.request_payload) ->> 'amount_minor')::bigint AS asked,
       f.id AS flow_id
  FROM staging AS s
 CROSS JOIN LATERAL (
       SELECT CASE s.reporting_category WHEN 'charge' THEN 'DEBIT' WHEN 'refund' THEN 'REFUND' END AS kind,
              CASE lower(s.currency) WHEN 'jpy' THEN 1 WHEN 'kwd' THEN 1000 ELSE 100 END AS scale) AS k
 CROSS JOIN LATERAL (SELECT k.kind, (abs(s.gross) * k.scale)::bigint AS amount_minor, k.scale) AS x
  LEFT JOIN floor_records AS r ON r.idempotency_key = s.idempotency_key
  LEFT JOIN floor_records AS rb
         ON s.idempotency_key IS NULL AND rb.biz_type = 'payment' AND rb.biz_id = s.biz_id
        AND rb.status <> 'FAILED'
  LEFT JOIN floor_flows AS f ON f.external_ref = s.source_id;
ANALYZE matched;
\echo floor: the new flows
INSERT INTO floor_flows (biz_type, biz_id, kind, amount_minor, currency, external_ref,
                         idempotency_key, duplicate_of, recorded_by, recorded_login)
SELECT m.rec_type, m.rec_biz_id, m.kind, m.amount_minor, m.currency, m.gateway_ref, m.record_key,
       (SELECT f.id FROM floor_flows AS f
         WHERE f.biz_type = m.rec_type AND f.biz_id = m.rec_biz_id AND f.kind = m.kind
           AND f.duplicate_of IS NULL),
       'ledger', session_user
  FROM matched AS m
 WHERE m.kind IS NOT NULL AND m.record_key IS NOT NULL AND m.flow_id IS NULL
   AND (m.kind <> 'DEBIT' OR m.asked = m.amount_minor)
ON CONFLICT DO NOTHING;
\echo floor: the UNKNOWN records decided
WITH decided AS (
    UPDATE floor_records AS r
       SET status = 'SUCCESS', version = r.version + 1, updated_at = now()
      FROM matched AS m
     WHERE r.idempotency_key = m.record_key AND r.status = 'UNKNOWN' AND m.kind = 'DEBIT'
       AND m.asked = m.amount_minor
    RETURNING r.idempotency_key, r.version, m.line_id, m.source_line, m.amount_minor, m.currency)
INSERT INTO floor_transitions (idempotency_key, from_status, to_status, version, actor_kind,
                               reason, evidence)
SELECT d.idempotency_key, 'UNKNOWN', 'SUCCESS', d.version, 'reconciler',
       'statement: line ' || d.line_id || ' shows the charge',
       jsonb_build_object('source', 'statement', 'gateway', :'gateway', 'line_id', d.line_id,
                          'source_line', d.source_line, 'amount_minor', d.amount_minor,
                          'currency', d.currency)
  FROM decided AS d;
\echo floor: the lines written
INSERT INTO floor_lines (gateway, line_id, statement_id, source_line, category, flow_kind,
                         amount_minor, currency, fee_minor, booked_at, gateway_ref,
                         idempotency_key, biz_id, booked, fields, result, record_key, flow_id)
SELECT :'gateway', m.line_id, 1, m.source_line, m.category, m.kind, m.amount_minor, m.currency,
       m.fee_minor, m.booked_at, m.gateway_ref, m.idempotency_key, m.biz_id, true, to_jsonb(s),
       CASE WHEN m.kind IS NULL THEN 'not_a_flow' WHEN m.record_key IS NULL THEN 'unmatched'
            WHEN m.kind = 'DEBIT' AND m.asked <> m.amount_minor THEN 'mismatched'
            ELSE 'matched' END,
       m.record_key, m.flow_id
  FROM matched AS m
  JOIN staging AS s ON s.balance_transaction_id = m.line_id
ON CONFLICT (gateway, line_id) DO NOTHING;
\echo floor: commit
COMMIT;
\timing off
SELECT 'floor: lines ' || count(*) || ', matched ' || count(*) FILTER (WHERE result = 'matched')
       || ', decided ' || (SELECT count(*) FROM floor_transitions)
  FROM floor_lines;
DROP TABLE floor_lines, floor_flows, floor_records, floor_transitions;
