-- One definition of each condition the readers share. The admin app, the
-- exporter and the simulator wrote "stuck" themselves, and the exporter kept its own copy of the
-- state machine; they now ask the schema.
--
-- Both conditions are single-expression SQL functions, not SECURITY DEFINER and STABLE like the
-- now() they read: the planner inlines them into the calling query, so
--   WHERE idem.is_stuck(status, lease_expires_at)
-- plans exactly as the expression it stands for, and a query restricted to
-- status IN ('PROCESSING', 'UNKNOWN') is still answered from the records_unsettled partial index.
-- Inlining requires the caller's EXECUTE privilege: the readers get it below.

-- A claimant whose lease has run out: it may have crashed, its answer may never come.
CREATE FUNCTION idem.lease_expired(status text, lease_expires_at timestamptz)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT status = 'PROCESSING' AND lease_expires_at < now()
$$;

COMMENT ON FUNCTION idem.lease_expired(text, timestamptz) IS
    'A PROCESSING record whose lease has ended (by the database''s clock): its claimant may be gone. Inlined by the planner.';

-- A record that needs a decision by evidence or a person: UNKNOWN, or PROCESSING past its lease.
CREATE FUNCTION idem.is_stuck(status text, lease_expires_at timestamptz)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT status = 'UNKNOWN' OR idem.lease_expired(status, lease_expires_at)
$$;

COMMENT ON FUNCTION idem.is_stuck(text, timestamptz) IS
    'A stuck record: UNKNOWN, or PROCESSING past its lease (idem.lease_expired). The admin app''s attention queue, the exporter''s stuck gauge and the simulator''s operator read this. Inlined by the planner.';

-- As 009 requires of every later function: owned by idem_owner, nothing for PUBLIC, then exactly
-- the contract's grants (shared/src/migrations.cpp, expectedFunctionGrants, checks them).
ALTER FUNCTION idem.lease_expired(text, timestamptz) OWNER TO idem_owner;
ALTER FUNCTION idem.is_stuck(text, timestamptz) OWNER TO idem_owner;
REVOKE ALL ON FUNCTION idem.lease_expired(text, timestamptz), idem.is_stuck(text, timestamptz)
    FROM PUBLIC;

-- The readers: the exporter (idem_reader), the admin app (idem_operator), the reconciler. The
-- state machine too: the exporter reads which transitions exist from idem.transition_allowed
-- instead of keeping a copy of it. All three functions only compute; they read no table.
GRANT EXECUTE ON FUNCTION
    idem.lease_expired(text, timestamptz),
    idem.is_stuck(text, timestamptz),
    idem.transition_allowed(text, text, text)
TO idem_reader, idem_operator, idem_reconciler;
