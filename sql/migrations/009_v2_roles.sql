-- Schema contract version 2 (docs/contract/schema.md, "Roles"), part 4 of 4: the reconciler, the
-- owner, and exactly the contract's grants.
--
-- Every object of the schema is owned by the NOLOGIN role idem_owner, and the SECURITY DEFINER
-- functions run as it: not as whoever happened to migrate (a superuser, in version 1).
--
-- Who may migrate: a superuser, or a role that is a member of idem_owner (ALTER ... OWNER TO and
-- every later CREATE OR REPLACE of an idem object need that membership). A deployment that
-- migrates as a non-superuser grants it once: GRANT idem_owner TO migrator. When the migrating role
-- is not yet a member, this migration grants it when it can (a CREATEROLE role can) and stops with
-- that instruction when it cannot.
--
-- Nothing is executable by PUBLIC, now or later:
--   * the functions' EXECUTE grants below are exactly the contract's table;
--   * idem_owner's default privileges revoke PUBLIC's EXECUTE from every function it creates. They
--     are set database-wide (FOR ROLE idem_owner, no IN SCHEMA): PostgreSQL grants EXECUTE to
--     PUBLIC by a global default that a per-schema REVOKE cannot take back, and idem_owner owns
--     nothing outside this schema. The migrating role's defaults are left alone: changing them
--     database-wide would change every function it creates in other schemas;
--   * a later migration that creates a function as the migrating role must ALTER it OWNER TO
--     idem_owner and REVOKE it FROM PUBLIC; if it does not, `idemctl migrate` refuses at its end:
--     it compares every idem function's grants with the contract's table
--     (shared/src/migrations.cpp, expectedFunctionGrants) and rolls the whole run back.
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['idem_reconciler', 'idem_owner'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;  -- another database of this cluster created it at the same moment
            END;
        END IF;
    END LOOP;
    IF NOT (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user)
       AND NOT pg_catalog.pg_has_role(current_user, 'idem_owner', 'MEMBER') THEN
        BEGIN
            EXECUTE format('GRANT idem_owner TO %I', current_user);
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE EXCEPTION 'the migrating role % must be a member of idem_owner, which owns the idem schema',
                current_user
                USING ERRCODE = 'insufficient_privilege',
                      HINT = format('As a superuser: GRANT idem_owner TO %I; then migrate again.', current_user);
        END;
    END IF;
END
$$;

-- Ownership: the schema, its tables (their identity sequences and indexes follow), views, domains
-- and functions.
DO $$
DECLARE
    o record;
BEGIN
    EXECUTE 'ALTER SCHEMA idem OWNER TO idem_owner';
    FOR o IN
        SELECT c.oid::regclass AS name, c.relkind
          FROM pg_catalog.pg_class AS c
         WHERE c.relnamespace = 'idem'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm')
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO idem_owner',
                       CASE o.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                                      ELSE 'TABLE' END, o.name);
    END LOOP;
    FOR o IN
        SELECT t.oid::regtype AS name
          FROM pg_catalog.pg_type AS t
         WHERE t.typnamespace = 'idem'::regnamespace AND t.typtype = 'd'
    LOOP
        EXECUTE format('ALTER DOMAIN %s OWNER TO idem_owner', o.name);
    END LOOP;
    FOR o IN
        SELECT p.oid::regprocedure AS name, p.prokind
          FROM pg_catalog.pg_proc AS p
         WHERE p.pronamespace = 'idem'::regnamespace
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO idem_owner',
                       CASE o.prokind WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END, o.name);
    END LOOP;
END
$$;

ALTER DEFAULT PRIVILEGES FOR ROLE idem_owner REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- Exactly the contract's table: first nothing for anyone, then what it says.
REVOKE ALL ON SCHEMA idem FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA idem FROM PUBLIC, idem_writer, idem_reader, idem_operator, idem_reconciler;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA idem FROM PUBLIC, idem_writer, idem_reader, idem_operator, idem_reconciler;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA idem FROM PUBLIC, idem_writer, idem_reader, idem_operator, idem_reconciler;

GRANT USAGE ON SCHEMA idem TO idem_writer, idem_reader, idem_operator, idem_reconciler;

-- idem_writer: the protocol, nothing else.
GRANT EXECUTE ON FUNCTION
    idem.begin(text, text, text, text, text, text, jsonb, interval, text, text),
    idem.complete(text, integer, jsonb, uuid),
    idem.fail(text, integer, text, uuid, boolean),
    idem.mark_unknown(text, integer, text, uuid),
    idem.expire_leases(),
    idem.record_fund_flow(text, text, text, bigint, text, text, text)
TO idem_writer;

-- Reading: the exporter (idem_reader), the admin app (idem_operator), the reconciler.
GRANT SELECT ON idem.records, idem.attempts, idem.transitions, idem.fund_flows, idem.retired_keys,
                idem.money_position
    TO idem_reader, idem_operator, idem_reconciler;

-- idem_operator: settle (the admin app, idemctl settle).
GRANT EXECUTE ON FUNCTION idem.settle(text, integer, text, text, jsonb, boolean) TO idem_operator;

-- idem_reconciler: decisions from evidence, and the lease sweep (idemctl reconcile).
GRANT EXECUTE ON FUNCTION
    idem.resolve(text, integer, text, text, jsonb),
    idem.reconcile(),
    idem.expire_leases()
TO idem_reconciler;
