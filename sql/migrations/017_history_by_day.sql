-- The history by day: idem.attempts and idem.transitions become tables partitioned by the day
-- (UTC) of created_at, so retention drops a whole day of history at once instead of deleting it
-- row by row, and a day's rows sit together on disk.
--
-- idem.records stays one table: its unique key is the idempotency key (and one live record per
-- business object), and a unique index of a partitioned table must include the partition key, so
-- partitioning records by time would let a key exist once per partition. idem.fund_flows stays one
-- table for the same reason: its unique external_ref and its one first flow per business object
-- and kind are what make a repeated callback or statement line a no-op.
--
-- Each history table gets:
--   * a DEFAULT partition, <table>_outside, that takes any row no day partition covers, so a write
--     never fails for want of a partition, and that keeps the old history of records still open
--     when retention drops their day (idem.purge);
--   * day partitions, <table>_pYYYYMMDD, created ahead by idem.prepare_history_partitions (run by
--     idemctl migrate, idem.purge and idemctl expire-leases);
--   * in a database that already holds history, the old table itself as the partition
--     <table>_before_days, covering everything before the first day partition: attached in place,
--     not copied. It is dropped by retention like a day, once its end is older than the age.
--
-- ids keep coming from the same counters; the primary key becomes (id, created_at), since a
-- partitioned table's unique index must hold the partition key (ids are unique by their sequence).
-- id is no longer an identity column (PostgreSQL 15 refuses one on a partitioned table): a
-- column default from the sequence, which only the owner's functions write.
--
-- Cost in place: an ACCESS EXCLUSIVE lock on both tables for the length of this migration, which
-- reads each old table once (its partition bound) and builds one index on it (the new primary
-- key); docs/benchmarks.md records the time at 10M records.

DO $migration$
DECLARE
    t text;
    v_next bigint;
    v_rows boolean;
    v_bound timestamptz;
    v_index record;
BEGIN
    FOREACH t IN ARRAY ARRAY['attempts', 'transitions'] LOOP
        EXECUTE format('LOCK TABLE idem.%I IN ACCESS EXCLUSIVE MODE', t);
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM idem.%I)', t) INTO v_rows;
        EXECUTE format('SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM idem.%I',
                       t || '_id_seq') INTO v_next;

        -- Free the names the partitioned table takes: the table's, its indexes', its trigger's.
        EXECUTE format('ALTER TABLE idem.%I RENAME TO %I', t, t || '_before_days');
        EXECUTE format('ALTER TABLE idem.%I ALTER COLUMN id DROP IDENTITY', t || '_before_days');
        EXECUTE format('ALTER TABLE idem.%I DROP CONSTRAINT %I', t || '_before_days', t || '_pkey');
        EXECUTE format('DROP TRIGGER IF EXISTS %I ON idem.%I', t || '_append_only', t || '_before_days');
        FOR v_index IN
            SELECT c.relname FROM pg_catalog.pg_index AS i
              JOIN pg_catalog.pg_class AS c ON c.oid = i.indexrelid
             WHERE i.indrelid = format('idem.%I', t || '_before_days')::regclass
        LOOP
            EXECUTE format('ALTER INDEX idem.%I RENAME TO %I', v_index.relname,
                           'before_days_' || v_index.relname);
        END LOOP;

        EXECUTE format('CREATE SEQUENCE idem.%I AS bigint START WITH %s OWNED BY NONE',
                       t || '_id_seq', v_next);
        EXECUTE format('ALTER SEQUENCE idem.%I OWNER TO idem_owner', t || '_id_seq');
        EXECUTE format('CREATE TABLE idem.%I (LIKE idem.%I INCLUDING DEFAULTS) PARTITION BY RANGE (created_at)',
                       t, t || '_before_days');
        EXECUTE format('ALTER TABLE idem.%I ALTER COLUMN id SET DEFAULT nextval(%L::regclass)',
                       t, 'idem.' || t || '_id_seq');
        EXECUTE format('ALTER TABLE idem.%I OWNER TO idem_owner', t);
        EXECUTE format('ALTER SEQUENCE idem.%I OWNED BY idem.%I.id', t || '_id_seq', t);
        EXECUTE format('ALTER TABLE idem.%I ADD CONSTRAINT %I PRIMARY KEY (id, created_at)', t, t || '_pkey');
        EXECUTE format('CREATE TABLE idem.%I PARTITION OF idem.%I DEFAULT', t || '_outside', t);
        EXECUTE format('ALTER TABLE idem.%I OWNER TO idem_owner', t || '_outside');

        IF v_rows THEN
            -- Everything before tomorrow (UTC), or after the newest row if a clock ran ahead.
            EXECUTE format('SELECT greatest(date_trunc(''day'', now() AT TIME ZONE ''UTC'') + interval ''1 day'', '
                           '       date_trunc(''day'', max(created_at) AT TIME ZONE ''UTC'') + interval ''1 day'') '
                           '       AT TIME ZONE ''UTC'' FROM idem.%I', t || '_before_days') INTO v_bound;
            EXECUTE format('ALTER TABLE idem.%I ATTACH PARTITION idem.%I FOR VALUES FROM (MINVALUE) TO (%L)',
                           t, t || '_before_days', v_bound);
            -- Read through the partitioned table, as every partition is.
            EXECUTE format('REVOKE ALL ON TABLE idem.%I FROM idem_reader, idem_operator, idem_reconciler',
                           t || '_before_days');
        ELSE
            EXECUTE format('DROP TABLE idem.%I', t || '_before_days');
        END IF;
    END LOOP;
END
$migration$;

-- The indexes of the old tables, now one per partition (an old table's own index is taken as its
-- partition's where it is the same).
CREATE INDEX attempts_by_agent ON idem.attempts USING btree (agent_id, created_at) WHERE (agent_id IS NOT NULL);
CREATE INDEX attempts_by_key ON idem.attempts USING btree (idempotency_key, id);
CREATE INDEX attempts_by_trace ON idem.attempts USING btree (trace_id) WHERE (trace_id IS NOT NULL);
CREATE INDEX attempts_created_at ON idem.attempts USING brin (created_at);
CREATE INDEX transitions_by_key ON idem.transitions USING btree (idempotency_key, id);
CREATE INDEX transitions_created_at ON idem.transitions USING brin (created_at);

-- Append-only, as before; a row trigger of a partitioned table is its partitions' too.
CREATE OR REPLACE TRIGGER attempts_append_only
    BEFORE UPDATE ON idem.attempts
    FOR EACH ROW
    EXECUTE FUNCTION idem.refuse_update();
CREATE OR REPLACE TRIGGER transitions_append_only
    BEFORE UPDATE ON idem.transitions
    FOR EACH ROW
    EXECUTE FUNCTION idem.refuse_update();

GRANT SELECT ON TABLE idem.attempts TO idem_reader, idem_operator, idem_reconciler;
GRANT SELECT ON TABLE idem.transitions TO idem_reader, idem_operator, idem_reconciler;
REVOKE ALL ON SEQUENCE idem.attempts_id_seq, idem.transitions_id_seq FROM PUBLIC;
