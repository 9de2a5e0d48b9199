"""Idempotency keys that survive retries.

The bug the anchors' trackers are full of: a key minted per call (a uuid4, a timestamp, a counter of
tries), so that every model retry, framework retry or HTTP retry is a new request and the payment
runs again. A key must name the *business intent*: this business object, this tool, this attempt as
the caller means it (the user asked to pay order 42; if they later ask to pay it again after a
definite failure, that is attempt 2, decided by the business, never by a retry loop).

The key is readable (operators search for it in the admin app): `biz_type/biz_id:tool:attempt`,
each part with `%`, `/` and `:` percent-escaped so that two different triples can never produce one
key. A key that would pass the schema's 255 characters keeps a readable prefix and ends in the
SHA-256 of the full form.
"""

from __future__ import annotations

import hashlib

MAX_KEY_LENGTH = 255


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace("/", "%2F").replace(":", "%3A")


def stable_key(biz_type: str, biz_id: str, tool: str, attempt: int = 1) -> str:
    """The idempotency key of one business intent; the same inputs give the same key, every time.

    `attempt` is the business attempt the caller states (1 unless the business decided to try
    again after a final failure), never a count of retries.
    """
    for name, value in (("biz_type", biz_type), ("biz_id", biz_id), ("tool", tool)):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"stable_key: {name} must be a non-blank string, got {value!r}")
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise ValueError(f"stable_key: attempt must be an integer >= 1 stated by the business, got {attempt!r}")
    key = f"{_escape(biz_type)}/{_escape(biz_id)}:{_escape(tool)}:{attempt}"
    if len(key) <= MAX_KEY_LENGTH:
        return key
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
    return f"{key[: MAX_KEY_LENGTH - len(digest) - 1]}~{digest}"
