-- The three group roles of the contract and exactly their grants. They are NOLOGIN: deployments
-- grant them to login roles (GRANT idem_operator TO alice). Roles are cluster-wide, so they are
-- created only when absent.
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['idem_writer', 'idem_reader', 'idem_operator'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;  -- another database of this cluster created it at the same moment
            END;
        END IF;
    END LOOP;
END
$$;

-- PostgreSQL grants EXECUTE on new functions to PUBLIC; nothing here is public.
REVOKE ALL ON SCHEMA idem FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA idem FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA idem FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA idem FROM PUBLIC;

GRANT USAGE ON SCHEMA idem TO idem_writer, idem_reader, idem_operator;

-- idem_writer: the protocol, nothing else.
GRANT EXECUTE ON FUNCTION
    idem.begin(text, text, text, text, text, text, jsonb, interval, text, text),
    idem.complete(text, integer, jsonb),
    idem.fail(text, integer, text),
    idem.mark_unknown(text, integer, text),
    idem.expire_leases(),
    idem.record_fund_flow(text, text, text, bigint, text, text, text)
TO idem_writer;

-- idem_reader: read everything (the exporter).
GRANT SELECT ON idem.records, idem.attempts, idem.transitions, idem.fund_flows TO idem_reader;

-- idem_operator: read everything and settle (the admin app, idemctl settle).
GRANT SELECT ON idem.records, idem.attempts, idem.transitions, idem.fund_flows TO idem_operator;
GRANT EXECUTE ON FUNCTION idem.settle(text, integer, text, text, jsonb) TO idem_operator;
