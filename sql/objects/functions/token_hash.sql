-- The stored form of a claim token: SHA-256 of its 16 bytes.

CREATE OR REPLACE FUNCTION idem.token_hash(p_token uuid)
 RETURNS bytea
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$ SELECT pg_catalog.sha256(pg_catalog.uuid_send(p_token)) $function$;

COMMENT ON FUNCTION idem.token_hash(uuid) IS
    'The stored form of a claim token: sha256(uuid_send(token)), in records.claim_token_hash.';
