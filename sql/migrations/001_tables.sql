-- The idem schema: four tables and the constraints that make their laws hold whatever the client.
-- Contract: docs/contract/schema.md. Names here are public interface; keep them.

CREATE SCHEMA IF NOT EXISTS idem;

-- The vocabulary as domains: an unknown value is refused by a named CHECK constraint wherever it
-- is written. Domains rather than table CHECKs because PostgreSQL keeps a domain's compiled check
-- in its type cache, while a table's CHECK constraints are re-read from their stored text by
-- every INSERT and UPDATE statement: on the protocol's hot path that is measurable.
CREATE DOMAIN idem.record_status AS text
    CONSTRAINT record_status_valid CHECK (VALUE IN ('PROCESSING', 'SUCCESS', 'FAILED', 'UNKNOWN'));
CREATE DOMAIN idem.trigger_source AS text
    CONSTRAINT trigger_source_valid
    CHECK (VALUE IN ('initial', 'llm', 'framework', 'http', 'callback'));
CREATE DOMAIN idem.attempt_outcome AS text
    CONSTRAINT attempt_outcome_valid
    CHECK (VALUE IN ('executed', 'replayed', 'in_progress', 'payload_mismatch', 'rejected'));
CREATE DOMAIN idem.fund_flow_kind AS text
    CONSTRAINT fund_flow_kind_valid
    CHECK (VALUE IN ('DEBIT', 'CREDIT', 'REFUND', 'FREEZE', 'UNFREEZE', 'CAPTURE'));
CREATE DOMAIN idem.actor_kind AS text
    CONSTRAINT actor_kind_valid CHECK (VALUE IN ('system', 'operator'));
CREATE DOMAIN idem.idempotency_key AS text
    CONSTRAINT idempotency_key_length CHECK (char_length(VALUE) BETWEEN 1 AND 255);
CREATE DOMAIN idem.name_text AS text
    CONSTRAINT name_text_nonblank CHECK (btrim(VALUE) <> '');
CREATE DOMAIN idem.currency_code AS text
    CONSTRAINT currency_code_valid CHECK (VALUE ~ '^[A-Z]{3}$');
CREATE DOMAIN idem.amount_minor AS bigint
    CONSTRAINT amount_minor_nonnegative CHECK (VALUE >= 0);

-- One row per idempotency key.
CREATE TABLE idem.records (
    idempotency_key  idem.idempotency_key NOT NULL,
    biz_type         idem.name_text NOT NULL,
    biz_id           idem.name_text NOT NULL,
    tool             idem.name_text NOT NULL,
    request_hash     text        NOT NULL,
    status           idem.record_status NOT NULL,
    version          integer     NOT NULL DEFAULT 1,
    lease_expires_at timestamptz,
    request_payload  jsonb,
    response_payload jsonb,
    last_error       text,
    -- How many times the record was claimed for execution: 1 at creation, +1 for each re-claim of a
    -- FAILED record. Replays and in-progress answers leave the record untouched; idem.attempts
    -- holds every request.
    attempt_count    integer     NOT NULL DEFAULT 1,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    -- version and attempt_count are owned by the triggers of sql/002_state_machine.sql.
    CONSTRAINT records_pkey PRIMARY KEY (idempotency_key),
    CONSTRAINT records_processing_has_lease
        CHECK (status <> 'PROCESSING' OR lease_expires_at IS NOT NULL)
);

-- At most one SUCCESS per business object: two different keys can never both succeed for it.
CREATE UNIQUE INDEX records_one_success_per_biz
    ON idem.records (biz_type, biz_id) WHERE status = 'SUCCESS';

-- At most one record per business object that is in flight or done (PROCESSING, UNKNOWN or
-- SUCCESS). This is what makes "rejected" race-free: a second key for an object that is in flight
-- or already paid loses on this index inside idem.begin. FAILED rows are exempt, so a business
-- object may fail any number of times under different keys.
CREATE UNIQUE INDEX records_one_live_per_biz
    ON idem.records (biz_type, biz_id) WHERE status <> 'FAILED';

-- The small unsettled set: the exporter's state gauges, the admin app's attention queue and
-- idem.expire_leases() read only this.
CREATE INDEX records_unsettled
    ON idem.records (status, lease_expires_at) WHERE status IN ('PROCESSING', 'UNKNOWN');

-- The admin app sorts and pages by these (keyset: the key breaks ties); retention and the
-- exporter's reconciliation read time ranges through them.
CREATE INDEX records_by_updated ON idem.records (updated_at, idempotency_key);
CREATE INDEX records_by_created ON idem.records (created_at, idempotency_key);

-- Append-only: one row per idem.begin call.
CREATE TABLE idem.attempts (
    id              bigint      GENERATED ALWAYS AS IDENTITY,
    idempotency_key text        NOT NULL,
    biz_type        text        NOT NULL,
    biz_id          text        NOT NULL,
    tool            text        NOT NULL,
    trigger_source  idem.trigger_source NOT NULL,
    outcome         idem.attempt_outcome NOT NULL,
    request_hash    text        NOT NULL,
    agent_id        text,
    trace_id        text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT attempts_pkey PRIMARY KEY (id)
);
CREATE INDEX attempts_by_key ON idem.attempts (idempotency_key, id);
-- Rows arrive in time order, so a BRIN index finds a time range (retention, the exporter's window
-- at start-up) at almost no write cost.
CREATE INDEX attempts_created_at ON idem.attempts USING brin (created_at);

-- Append-only history of every status change, written only by the trigger on idem.records.
CREATE TABLE idem.transitions (
    id              bigint      GENERATED ALWAYS AS IDENTITY,
    idempotency_key text        NOT NULL,
    from_status     idem.record_status,
    to_status       idem.record_status NOT NULL,
    version         integer     NOT NULL,
    actor           text        NOT NULL DEFAULT session_user,
    actor_kind      idem.actor_kind NOT NULL,
    reason          text,
    evidence        jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT transitions_pkey PRIMARY KEY (id),
    CONSTRAINT transitions_operator_gives_reason
        CHECK (actor_kind <> 'operator' OR btrim(coalesce(reason, '')) <> '')
);
CREATE INDEX transitions_by_key ON idem.transitions (idempotency_key, id);
CREATE INDEX transitions_created_at ON idem.transitions USING brin (created_at);

-- The money ledger as the gateway reported it.
CREATE TABLE idem.fund_flows (
    id              bigint      GENERATED ALWAYS AS IDENTITY,
    biz_type        idem.name_text NOT NULL,
    biz_id          idem.name_text NOT NULL,
    kind            idem.fund_flow_kind NOT NULL,
    amount_minor    idem.amount_minor NOT NULL,
    currency        idem.currency_code NOT NULL,
    external_ref    idem.name_text NOT NULL,
    idempotency_key text,
    duplicate_of    bigint,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT fund_flows_pkey PRIMARY KEY (id),
    CONSTRAINT fund_flows_external_ref_unique UNIQUE (external_ref),
    CONSTRAINT fund_flows_duplicate_of_fkey
        FOREIGN KEY (duplicate_of) REFERENCES idem.fund_flows (id)
);
-- Exactly one first flow per (biz_type, biz_id, kind): idem.record_fund_flow races on this index,
-- so two concurrent inserts can never both be "first".
CREATE UNIQUE INDEX fund_flows_one_first_per_biz
    ON idem.fund_flows (biz_type, biz_id, kind) WHERE duplicate_of IS NULL;
CREATE INDEX fund_flows_by_biz ON idem.fund_flows (biz_type, biz_id);
CREATE INDEX fund_flows_created_at ON idem.fund_flows USING brin (created_at);
CREATE INDEX fund_flows_duplicate_of ON idem.fund_flows (duplicate_of) WHERE duplicate_of IS NOT NULL;
