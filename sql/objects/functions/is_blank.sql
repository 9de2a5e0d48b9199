-- Blank, for a reason: empty or whitespace of any kind. [[:space:]] is the locale's idea of
-- whitespace, which leaves out the no-break and zero-width spaces people paste from documents,
-- so those are listed too (Unicode White_Space plus U+180E, U+200B..U+200D, U+2060, U+FEFF).

CREATE OR REPLACE FUNCTION idem.is_blank(p_text text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT p_text IS NULL
        OR p_text ~ '^[[:space:]\u0085\u00a0\u1680\u180e\u2000-\u200d\u2028\u2029\u202f\u205f\u2060\u3000\ufeff]*$'
$function$;

COMMENT ON FUNCTION idem.is_blank(text) IS
    'NULL, empty, or only whitespace of any kind (tabs, newlines, no-break and zero-width spaces): not a reason.';
