-- The gateway's own records as evidence: its statements, line by line, and its callbacks. A
-- record whose outcome is UNKNOWN is decided by what the gateway itself says it did, so that a
-- person only sees what the gateway cannot answer.
--
--   * idem.gateways: each gateway a statement or a callback comes from, the business types whose
--     side effects it carries, how long it takes a side effect to reach its statement, and whether
--     the absence of a line in its final statements may be taken as evidence (off until enabled).
--   * idem.statements: one row per imported file, once per file (its SHA-256), with the period it
--     covers and whether that period is final.
--   * idem.statement_lines: one row per line of the gateway, once per line id however many files
--     repeat it, with what matching found (statement_line_result) and the fund flow it became.
--   * idem.gateway_events: one row per callback event or status lookup answer, once per event id,
--     so that a re-delivered callback is a no-op.
--
-- Written only through the protocol functions (sql/objects/functions/import_statement_lines.sql
-- and its neighbours), by the gateway's side (idem_ledger); read by every reader.

-- Its CHECK comes from sql/objects/domains/statement_line_result.sql (shared/vocabulary.toml).
CREATE DOMAIN idem.statement_line_result AS text;

CREATE TABLE idem.gateways (
    gateway             text        NOT NULL,
    biz_types           text[]      NOT NULL DEFAULT '{}',
    settlement_delay    interval    NOT NULL DEFAULT '3 days',
    absence_is_evidence boolean     NOT NULL DEFAULT false,
    declared_by         text        NOT NULL DEFAULT session_user,
    declared_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT gateways_pkey PRIMARY KEY (gateway),
    CONSTRAINT gateways_name_valid
        CHECK (char_length(gateway) BETWEEN 1 AND 64 AND gateway !~ '[^A-Za-z0-9_.-]'),
    CONSTRAINT gateways_delay_valid
        CHECK (settlement_delay >= interval '0' AND settlement_delay <= interval '60 days'),
    -- Absence proves nothing about a business type the gateway was never told it carries.
    CONSTRAINT gateways_absence_needs_types
        CHECK (NOT absence_is_evidence OR cardinality(biz_types) > 0)
);

COMMENT ON TABLE idem.gateways IS
    'A payment gateway whose statements and callbacks are evidence: biz_types (the business types whose side effects it carries), settlement_delay (how long a side effect takes to reach its statement), absence_is_evidence (a final statement without a line for an UNKNOWN record of those types may resolve it FAILED; off until the owner enables it with idem.declare_gateway).';

CREATE TABLE idem.statements (
    id          bigint GENERATED ALWAYS AS IDENTITY,
    gateway     text        NOT NULL,
    format      text        NOT NULL,
    file_name   text        NOT NULL,
    file_sha256 text        NOT NULL,
    period_from timestamptz,
    period_to   timestamptz,
    final       boolean     NOT NULL DEFAULT false,
    line_count  bigint      NOT NULL DEFAULT 0,
    new_lines   bigint      NOT NULL DEFAULT 0,
    imported_at timestamptz NOT NULL DEFAULT now(),
    imported_by text        NOT NULL DEFAULT session_user,
    -- The transaction that opened it: its lines are added and it is closed in that one alone.
    opened_in   bigint      NOT NULL DEFAULT txid_current(),
    CONSTRAINT statements_pkey PRIMARY KEY (id),
    CONSTRAINT statements_gateway_fkey FOREIGN KEY (gateway) REFERENCES idem.gateways (gateway),
    -- The same file twice is imported once: the second import (or a concurrent one, which waits
    -- on this index) finds the first.
    CONSTRAINT statements_file_once UNIQUE (gateway, file_sha256),
    CONSTRAINT statements_sha256_valid CHECK (file_sha256 ~ '^[0-9a-f]{64}$'),
    CONSTRAINT statements_period_valid CHECK (period_from < period_to),
    CONSTRAINT statements_final_has_period
        CHECK (NOT final OR (period_from IS NOT NULL AND period_to IS NOT NULL))
);

COMMENT ON TABLE idem.statements IS
    'One imported statement file of a gateway, once per file content (file_sha256): the period [period_from, period_to) it covers, whether the gateway declares that period final, how many lines it held and how many no earlier file had.';

CREATE TABLE idem.statement_lines (
    id              bigint GENERATED ALWAYS AS IDENTITY,
    gateway         text        NOT NULL,
    line_id         text        NOT NULL,
    statement_id    bigint      NOT NULL,
    source_line     bigint      NOT NULL,
    category        text        NOT NULL,
    flow_kind       idem.fund_flow_kind,
    amount_minor    idem.amount_minor NOT NULL,
    currency        idem.currency_code NOT NULL,
    fee_minor       bigint,
    booked_at       timestamptz,
    value_date      date,
    gateway_ref     text,
    idempotency_key text,
    biz_id          text,
    booked          boolean     NOT NULL,
    fields          jsonb       NOT NULL,
    result          idem.statement_line_result NOT NULL,
    record_key      text,
    flow_id         bigint,
    detail          text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    matched_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT statement_lines_pkey PRIMARY KEY (id),
    CONSTRAINT statement_lines_statement_fkey
        FOREIGN KEY (statement_id) REFERENCES idem.statements (id),
    -- A line repeated by a later file (a re-sent day, overlapping periods) is one line.
    CONSTRAINT statement_lines_once UNIQUE (gateway, line_id),
    CONSTRAINT statement_lines_amount_bounded CHECK (amount_minor <= 999999999999999)
);

CREATE INDEX statement_lines_idempotency_key ON idem.statement_lines (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX statement_lines_gateway_ref ON idem.statement_lines (gateway_ref)
    WHERE gateway_ref IS NOT NULL;
CREATE INDEX statement_lines_biz_id ON idem.statement_lines (gateway, biz_id)
    WHERE biz_id IS NOT NULL;
CREATE INDEX statement_lines_record_key ON idem.statement_lines (record_key)
    WHERE record_key IS NOT NULL;
CREATE INDEX statement_lines_statement ON idem.statement_lines (statement_id);
-- The exporter counts lines as they are imported, by id, from where it started (created_at).
CREATE INDEX statement_lines_created_at ON idem.statement_lines USING brin (created_at);
-- The console's and the exporter's lists of what a person must look at stay small however long
-- the history grows.
CREATE INDEX statement_lines_needs_person ON idem.statement_lines (gateway, id)
    WHERE result IN ('mismatched', 'unmatched', 'duplicate');

COMMENT ON TABLE idem.statement_lines IS
    'One line of a gateway''s statements, once per (gateway, line_id) whichever files held it: the side effect it is (flow_kind, none for fees and payouts), gross amount_minor in the currency''s minor units, the references it is matched by (idempotency_key, gateway_ref, biz_id), what matching found (result, record_key, detail) and the fund flow it became (flow_id).';

CREATE TABLE idem.gateway_events (
    id              bigint GENERATED ALWAYS AS IDENTITY,
    gateway         text        NOT NULL,
    source          text        NOT NULL,
    event_id        text        NOT NULL,
    gateway_ref     text,
    flow_kind       idem.fund_flow_kind,
    amount_minor    idem.amount_minor,
    currency        idem.currency_code,
    idempotency_key text,
    biz_id          text,
    payload         jsonb       NOT NULL,
    result          idem.statement_line_result NOT NULL,
    record_key      text,
    flow_id         bigint,
    detail          text        NOT NULL DEFAULT '',
    received_at     timestamptz NOT NULL DEFAULT now(),
    received_by     text        NOT NULL DEFAULT session_user,
    CONSTRAINT gateway_events_pkey PRIMARY KEY (id),
    CONSTRAINT gateway_events_gateway_fkey FOREIGN KEY (gateway) REFERENCES idem.gateways (gateway),
    CONSTRAINT gateway_events_once UNIQUE (gateway, source, event_id),
    CONSTRAINT gateway_events_source_valid CHECK (source IN ('callback', 'lookup'))
);

CREATE INDEX gateway_events_record_key ON idem.gateway_events (record_key)
    WHERE record_key IS NOT NULL;
CREATE INDEX gateway_events_idempotency_key ON idem.gateway_events (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX gateway_events_biz_id ON idem.gateway_events (biz_id) WHERE biz_id IS NOT NULL;

COMMENT ON TABLE idem.gateway_events IS
    'One callback event (source callback, once per event id: a re-delivery is a no-op) or status lookup answer (source lookup) of a gateway, what it was found to be (result, record_key, detail) and the fund flow it became.';

ALTER TABLE idem.gateways OWNER TO idem_owner;
ALTER TABLE idem.statements OWNER TO idem_owner;
ALTER TABLE idem.statement_lines OWNER TO idem_owner;
ALTER TABLE idem.gateway_events OWNER TO idem_owner;
ALTER DOMAIN idem.statement_line_result OWNER TO idem_owner;

-- Every reader sees the evidence; only the protocol functions write it.
GRANT SELECT ON idem.gateways, idem.statements, idem.statement_lines, idem.gateway_events
    TO idem_reader, idem_operator, idem_reconciler, idem_ledger;
-- Their identity sequences serve the protocol functions alone, as every idem sequence does.
REVOKE ALL ON SEQUENCE idem.statements_id_seq, idem.statement_lines_id_seq,
    idem.gateway_events_id_seq FROM PUBLIC;
