-- Schema contract version 2 (docs/contract/schema.md), part 1 of 4: the vocabulary, the new
-- columns, the tombstones of retention and the one definition of "money moved".
-- 006..009 bring any version-1 database to version 2 in place, with its data, in the one
-- transaction idemctl migrate runs them in.

-- The vocabulary grows: the reconciler acts (idem.resolve, idem.reconcile) and a begin under a key
-- removed by retention is answered `retired`. NOT VALID: every existing value is valid under the
-- wider set, so there is nothing to scan; new values are checked as before.
ALTER DOMAIN idem.actor_kind DROP CONSTRAINT actor_kind_valid;
ALTER DOMAIN idem.actor_kind ADD CONSTRAINT actor_kind_valid
    CHECK (VALUE IN ('system', 'operator', 'reconciler')) NOT VALID;
ALTER DOMAIN idem.attempt_outcome DROP CONSTRAINT attempt_outcome_valid;
ALTER DOMAIN idem.attempt_outcome ADD CONSTRAINT attempt_outcome_valid
    CHECK (VALUE IN ('executed', 'replayed', 'in_progress', 'payload_mismatch', 'rejected',
                     'retired')) NOT VALID;

-- retry_allowed: may a FAILED record be claimed again by the same request? idem.fail says so
-- (false: a definite business failure, replayed to every retry), settle and resolve to FAILED set it.
-- claim_token_hash: SHA-256 of the 16 bytes of the claim token idem.begin handed the claimant
-- (sha256(uuid_send(token))); the token itself is never stored. Both are added without a table
-- rewrite (a constant default is kept in the catalog).
ALTER TABLE idem.records
    ADD COLUMN retry_allowed boolean NOT NULL DEFAULT false,
    ADD COLUMN claim_token_hash bytea;

-- A version-1 FAILED record was re-claimable by definition, except where version 1 let `fail`
-- declare an UNKNOWN record FAILED (the path version 2 closes): its outcome is uncertain, so it
-- stays final (a retry is replayed the failure) until a person corrects it. v1 records in flight
-- keep no token: their v1 clients cannot answer through the v2 functions, so they expire to
-- UNKNOWN and are reconciled or settled like any stuck record.
-- The records trigger is off for this one statement: it would stamp updated_at (and the upgrade
-- must leave every version-1 value as it was); no status changes, so there is no history to write.
ALTER TABLE idem.records DISABLE TRIGGER records_guard;
UPDATE idem.records AS r
   SET retry_allowed = true
 WHERE r.status = 'FAILED'
   AND NOT EXISTS (SELECT 1 FROM idem.transitions AS t
                    WHERE t.idempotency_key = r.idempotency_key
                      AND t.version = r.version AND t.to_status = 'FAILED'
                      AND t.from_status = 'UNKNOWN' AND t.actor_kind = 'system');
ALTER TABLE idem.records ENABLE TRIGGER records_guard;

-- One index fewer on the protocol's hot path: records_one_live_per_biz (001) is unique over
-- (biz_type, biz_id) for every status but FAILED, SUCCESS included, so it already allows at most
-- one SUCCESS per business object (the contract's rule, still a partial unique index); the
-- SUCCESS-only index repeated it and cost every complete an index insertion (a status change is
-- never a HOT update). A probe for an object's SUCCESS record (the exporter's reconciliation) is
-- answered through records_one_live_per_biz: the planner proves status = 'SUCCESS' implies its
-- predicate.
DROP INDEX idem.records_one_success_per_biz;

-- What retention leaves of a removed SUCCESS or FAILED record (idem.purge), so that the key is
-- never executed again (`retired`) and a business object that succeeded stays paid (`rejected`).
CREATE TABLE idem.retired_keys (
    idempotency_key idem.idempotency_key NOT NULL,
    biz_type        text        NOT NULL,
    biz_id          text        NOT NULL,
    request_hash    text        NOT NULL,
    status          idem.record_status NOT NULL,
    retired_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT retired_keys_pkey PRIMARY KEY (idempotency_key),
    CONSTRAINT retired_keys_settled CHECK (status IN ('SUCCESS', 'FAILED'))
);
-- idem.begin probes this for every new key: was the business object paid before its record went?
CREATE INDEX retired_keys_paid_biz ON idem.retired_keys (biz_type, biz_id) WHERE status = 'SUCCESS';
-- idem.purge_retired removes by age.
CREATE INDEX retired_keys_retired_at ON idem.retired_keys USING brin (retired_at);

-- Money moved for a business object (docs/contract/schema.md, "Money moved"; NOTES "Charge
-- once"), written down once: settle, resolve and begin read this view, and so do the C++ settle
-- path, the admin app and operators (SELECT money_moved FROM idem.money_position WHERE
-- biz_type = $1 AND biz_id = $2; no row: no flows, nothing moved).
--   * DEBIT and CAPTURE charge, REFUND gives back: money moved when the charges exceed the refunds.
--   * CREDIT is money to the customer that is not a refund: it never offsets a charge.
--   * FREEZE and UNFREEZE are holds, not movements: they count for nothing.
--   * Amounts compare within one currency: when the flows that move money (all but the holds)
--     span more than one currency, money moved, whatever the numbers say.
-- A query for one business object is answered through fund_flows_by_biz: its conditions on the
-- grouping columns are pushed below the GROUP BY.
CREATE VIEW idem.money_position AS
SELECT f.biz_type,
       f.biz_id,
       (count(DISTINCT f.currency) FILTER (WHERE f.kind NOT IN ('FREEZE', 'UNFREEZE')) > 1
        OR coalesce(sum(f.amount_minor) FILTER (WHERE f.kind IN ('DEBIT', 'CAPTURE')), 0)
           > coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = 'REFUND'), 0)) AS money_moved,
       coalesce(sum(f.amount_minor) FILTER (WHERE f.kind IN ('DEBIT', 'CAPTURE')), 0) AS charged_minor,
       coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = 'REFUND'), 0) AS refunded_minor,
       coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = 'CREDIT'), 0) AS credited_minor,
       coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = 'FREEZE'), 0)
         - coalesce(sum(f.amount_minor) FILTER (WHERE f.kind = 'UNFREEZE'), 0) AS held_minor,
       -- The one currency of the object's flows; NULL when they span several (see currencies).
       CASE WHEN count(DISTINCT f.currency) = 1 THEN min(f.currency::text) END AS currency,
       array_agg(DISTINCT f.currency::text ORDER BY f.currency::text) AS currencies,
       count(*) AS flow_count,
       count(*) FILTER (WHERE f.duplicate_of IS NOT NULL) AS duplicate_flow_count,
       max(f.created_at) AS last_flow_at
  FROM idem.fund_flows AS f
 GROUP BY f.biz_type, f.biz_id;

COMMENT ON VIEW idem.money_position IS
    'Money moved per business object (schema contract v2): DEBIT+CAPTURE exceed REFUND within one currency, or the non-hold flows span several currencies. FREEZE/UNFREEZE are holds; CREDIT does not offset. No row: no flows, nothing moved. The one definition: settle, resolve and begin use it.';

-- Blank, for a reason: empty or whitespace of any kind. [[:space:]] is the locale's idea of
-- whitespace, which leaves out the no-break and zero-width spaces people paste from documents,
-- so those are listed too (Unicode White_Space plus U+180E, U+200B..U+200D, U+2060, U+FEFF).
CREATE FUNCTION idem.is_blank(p_text text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT p_text IS NULL
        OR p_text ~ '^[[:space:]\u0085\u00a0\u1680\u180e\u2000-\u200d\u2028\u2029\u202f\u205f\u2060\u3000\ufeff]*$'
$$;

COMMENT ON FUNCTION idem.is_blank(text) IS
    'NULL, empty, or only whitespace of any kind (tabs, newlines, no-break and zero-width spaces): not a reason.';
