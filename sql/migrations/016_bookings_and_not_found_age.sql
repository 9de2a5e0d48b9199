-- Two refinements of the gateway's evidence.
--
-- A gateway's status API may answer "no such payment" for a call it received a moment ago and has
-- not recorded yet; taken at once as "did not happen", that answer would let the call run a
-- second time. idem.gateways.not_found_after is how old the record's last change (its claim, its
-- UNKNOWN mark) must be before such an answer decides anything: 10 minutes unless the owner
-- declares otherwise (idem.declare_gateway, idemctl declare-gateway --not-found-after).
--
-- A statement line read while pending (camt's PDNG, not booked yet) is matched only once a later
-- file books it. What matching then finds is appended here, one row a booking, so that a reader
-- that counts lines as they arrive (the exporter's idempotency_statement_lines_total, by the id
-- of each new row) also counts what a booking found: money no record explains must page whether
-- it arrived booked or was booked later.
--
-- Written only by idem.add_statement_lines, in the import's transaction; read by every reader.

CREATE TABLE idem.statement_line_bookings (
    id          bigint GENERATED ALWAYS AS IDENTITY,
    line        bigint      NOT NULL,
    gateway     text        NOT NULL,
    result      idem.statement_line_result NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT statement_line_bookings_pkey PRIMARY KEY (id),
    CONSTRAINT statement_line_bookings_line_fkey
        FOREIGN KEY (line) REFERENCES idem.statement_lines (id),
    -- A line is booked once.
    CONSTRAINT statement_line_bookings_once UNIQUE (line)
);

-- The exporter reads the bookings as they are made, by id, from where it started (created_at).
CREATE INDEX statement_line_bookings_created_at ON idem.statement_line_bookings
    USING brin (created_at);

COMMENT ON TABLE idem.statement_line_bookings IS
    'One row each time a later statement books a line first read as pending: the line (idem.statement_lines.id), its gateway and what matching found when it was booked.';

ALTER TABLE idem.statement_line_bookings OWNER TO idem_owner;
GRANT SELECT ON idem.statement_line_bookings
    TO idem_reader, idem_operator, idem_reconciler, idem_ledger;
REVOKE ALL ON SEQUENCE idem.statement_line_bookings_id_seq FROM PUBLIC;

ALTER TABLE idem.gateways
    ADD COLUMN not_found_after interval NOT NULL DEFAULT interval '10 minutes',
    ADD CONSTRAINT gateways_not_found_after_valid
        CHECK (not_found_after BETWEEN interval '0' AND interval '7 days');

COMMENT ON COLUMN idem.gateways.not_found_after IS
    'How old a record''s last change must be before this gateway''s status answer "did not happen" decides it FAILED (a younger answer may only mean the gateway has not recorded the call yet).';

-- The declaration gains it: the four-argument form goes (sql/objects/ defines the new one).
DROP FUNCTION IF EXISTS idem.declare_gateway(text, text[], interval, boolean);
