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

`compact_key` is the same intent's key for a gateway field that takes fewer characters than the
schema (SEPA's EndToEndId: 35 of a small character set): the record is claimed under it, and the
same string goes to the gateway (`idemwatch.gateway_refs`), whose statements and callbacks then
name the record exactly.

`tool_call_key` is the key of one tool call of one agent run, for a tool behind idemwatch-proxy
that a client reaches through MCP or HTTP without a business key at hand: the run's id, the step
and the tool, never the JSON-RPC id or anything else that changes on a retry. `mcp_meta` puts it
where the proxy reads it, in a `tools/call`'s `params._meta`.
"""

from __future__ import annotations

import hashlib
import re

MAX_KEY_LENGTH = 255
# compact_key: SEPA's EndToEndId, the shortest field a key goes into, takes 35 characters.
COMPACT_KEY_LENGTH = 35
_COMPACT_DIGEST_LENGTH = 20  # hex characters of the SHA-256: 80 bits
_COMPACT_PREFIX_LENGTH = COMPACT_KEY_LENGTH - _COMPACT_DIGEST_LENGTH - 1
# A stable key of these characters only (one `/`, never first or last) is in SEPA's set as it is.
_COMPACT_AS_IS = re.compile(r"[A-Za-z0-9/:.-]+")


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace("/", "%2F").replace(":", "%3A")


def _within(key: str, limit: int) -> str:
    """`key` when it has at most `limit` characters; else its prefix, `~` and its SHA-256."""
    if len(key) <= limit:
        return key
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
    return f"{key[: limit - len(digest) - 1]}~{digest}"


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
    return _within(f"{_escape(biz_type)}/{_escape(biz_id)}:{_escape(tool)}:{attempt}", MAX_KEY_LENGTH)


def compact_key(biz_type: str, biz_id: str, tool: str, attempt: int = 1) -> str:
    """The key of one business intent in at most 35 characters of SEPA's character set, so that it
    fits every field a gateway keeps it in (SEPA's EndToEndId, Adyen's merchant reference, Stripe's
    metadata); the same inputs give the same key, every time, in both clients.

    It is `stable_key(...)` itself when that fits (`payment/order-42:pay:1`); else the stable key's
    start, its runs of other characters written `-` (14 characters at most), a `.` and the first 20
    hex characters of the SHA-256 of the stable key (`payment-3f2a9c.` + 20 hex). The two forms never
    meet: a stable key always has `:`, the digest form never. Claim the record under this key and
    give the gateway this same string.
    """
    key = stable_key(biz_type, biz_id, tool, attempt)
    if len(key) <= COMPACT_KEY_LENGTH and _COMPACT_AS_IS.fullmatch(key):
        return key
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:_COMPACT_DIGEST_LENGTH]
    prefix = re.sub(r"[^A-Za-z0-9]+", "-", key).strip("-")[:_COMPACT_PREFIX_LENGTH].rstrip("-")
    return f"{prefix or 'key'}.{digest}"


# The proxy takes an MCP call's key of at most 200 printable ASCII characters.
MAX_TOOL_CALL_KEY_LENGTH = 200
MCP_KEY_FIELD = "io.idemwatch/idempotencyKey"
_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-")


def _percent(part: str) -> str:
    return "".join(c if c in _PLAIN else "".join(f"%{b:02X}" for b in c.encode("utf-8")) for c in part)


def tool_call_key(run_id: str, step: int | str, tool: str) -> str:
    """The key of one tool call of one agent run: `run:RUN:STEP:TOOL`, each part percent-escaped
    (every byte outside letters, digits and `._~-`), so printable ASCII whatever the run's id; the
    same inputs give the same key in both clients. `step` is the run's own numbering of the call
    (the turn and the call's place in it), kept across retries; never the JSON-RPC id, which a
    client changes on every retry. A key over 200 characters keeps a prefix and ends in `~` and
    the SHA-256 of the full form.
    """
    for name, value in (("run_id", run_id), ("tool", tool)):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"tool_call_key: {name} must be a non-blank string, got {value!r}")
    if isinstance(step, bool) or not (
        (isinstance(step, int) and step >= 0) or (isinstance(step, str) and step.strip())
    ):
        raise ValueError(f"tool_call_key: step must be an integer >= 0 or a non-blank string, got {step!r}")
    return _within(f"run:{_percent(run_id)}:{_percent(str(step))}:{_percent(tool)}", MAX_TOOL_CALL_KEY_LENGTH)


def mcp_meta(key: str) -> dict:
    """The `_meta` of an MCP `tools/call` that carries `key` to idemwatch-proxy."""
    if not isinstance(key, str) or not key or len(key) > MAX_TOOL_CALL_KEY_LENGTH or not all(" " <= c <= "~" for c in key):
        raise ValueError(f"mcp_meta: a key is 1 to {MAX_TOOL_CALL_KEY_LENGTH} printable ASCII characters, got {key!r}")
    return {MCP_KEY_FIELD: key}
