-- A reason a person can read: at least one letter or digit of a script people write (Latin, Greek,
-- Cyrillic, Armenian, Hebrew, Arabic, the Indic and Thai scripts, Georgian, Hangul, Kana, CJK
-- ideographs, full-width Latin), whatever the database's locale. Invisible characters that look
-- like text to a blank check (U+2800 braille blank, U+3164 and U+115F/U+1160 Hangul fillers,
-- U+200E marks, U+00AD soft hyphen, U+2061 invisible operators) are not among them.

CREATE OR REPLACE FUNCTION idem.has_visible_text(p_text text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT coalesce(p_text ~ '[0-9A-Za-z\u00AA\u00B5\u00BA\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u02AF\u0370-\u03FF\u0400-\u052F\u0531-\u0556\u0561-\u0587\u05D0-\u05EA\u0620-\u064A\u0660-\u0669\u06F0-\u06F9\u0904-\u0939\u0966-\u096F\u0985-\u09B9\u0E01-\u0E30\u0E50-\u0E59\u10A0-\u10FF\u1100-\u115E\u1161-\u11FF\u1E00-\u1FFF\u3041-\u3096\u30A1-\u30FA\u3400-\u4DBF\u4E00-\u9FFF\uAC00-\uD7A3\uF900-\uFAFF\uFF10-\uFF19\uFF21-\uFF3A\uFF41-\uFF5A\U00020000-\U0002FA1F]', false)
$function$;

COMMENT ON FUNCTION idem.has_visible_text(text) IS
    'Holds at least one letter or digit of a written script (not only spaces, marks, fillers or invisible characters): what a decision''s reason needs.';
