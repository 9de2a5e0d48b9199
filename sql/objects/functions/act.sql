-- Who acts and why, for the records trigger (idem.records_guard): transaction-local settings.
-- An SQL function so that PL/pgSQL evaluates it as a simple expression, without running a query.

CREATE OR REPLACE FUNCTION idem.act(p_actor_kind text, p_reason text, p_evidence text)
 RETURNS text
 LANGUAGE sql
AS $function$
    SELECT pg_catalog.set_config('idem.actor_kind', p_actor_kind, true)
        || pg_catalog.set_config('idem.reason', p_reason, true)
        || pg_catalog.set_config('idem.evidence', p_evidence, true)
$function$;

COMMENT ON FUNCTION idem.act(text, text, text) IS
    'Internal: sets who acts and why (idem.actor_kind, idem.reason, idem.evidence) for the records trigger, transaction-local.';
