-- The operator's decision on a record no machine could settle. The reason is required; the
-- version is the one the operator saw, so a decision made on stale information is refused.

CREATE OR REPLACE FUNCTION idem.settle(
    p_key text,
    p_expected_version integer,
    p_to_status text,
    p_reason text,
    p_evidence jsonb DEFAULT NULL::jsonb,
    p_override_money_moved boolean DEFAULT false,
    OUT result text,
    OUT status text,
    OUT version integer)
 RETURNS record
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
#variable_conflict use_column
BEGIN
    PERFORM idem.check_decision('settle', p_to_status, p_reason, p_evidence);
    SELECT * INTO result, status, version
      FROM idem.decide('operator', p_key, p_expected_version, p_to_status, p_reason, p_evidence,
                       p_override_money_moved);
    -- A statement line the operator accepts as the side effect becomes it (or nothing is settled).
    IF result = 'ok' AND p_to_status = 'SUCCESS' AND jsonb_typeof(p_evidence) = 'object'
       AND p_evidence -> 'accepted_proposal' = 'true'::jsonb THEN
        PERFORM idem.accept_statement_line(p_key, p_evidence ->> 'gateway',
                                           p_evidence ->> 'line_id', p_reason);
    END IF;
END
$function$;

COMMENT ON FUNCTION idem.settle(text, integer, text, text, jsonb, boolean) IS
    'The operator''s decision (schema contract v3): UNKNOWN or PROCESSING past its lease -> SUCCESS or FAILED, or FAILED -> SUCCESS (a correction: the side effect happened after all). Reason required (not blank, at most 2000 characters), evidence at most 64 KiB. result ok | conflict | invalid_transition | not_found | lease_active (PROCESSING, lease live: the claimant may still answer) | side_effect_recorded (FAILED refused: the ledger records the record''s side effect, see idem.side_effect_of) unless override_money_moved, which the transition''s evidence then records under "override_money_moved". Settling FAILED sets retry_allowed. Settling SUCCESS with a statement line as evidence and "accepted_proposal": true makes that line the record''s side effect (idem.accept_statement_line), or refuses the whole settle (22023) when it cannot be.';
