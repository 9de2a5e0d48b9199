"""The protocol's vocabulary (docs/contract/schema.md, version 3): one enum per column or answer.

Each value is the exact string the database stores and returns, so `Enum(text)` parses an answer and
`.value` formats an argument; an unknown value from the server raises `ValueError` rather than being
guessed at.
"""

from __future__ import annotations

import enum


class TriggerSource(str, enum.Enum):
    """Why this request was sent. The caller states it; it feeds the retry-rate-by-source figure."""

    INITIAL = "initial"  # the first try
    LLM = "llm"  # the model re-issued the tool call
    FRAMEWORK = "framework"  # the agent framework's retry policy
    HTTP = "http"  # the HTTP/RPC client's retry
    CALLBACK = "callback"  # an async callback or webhook re-drove the request


class Outcome(str, enum.Enum):
    """What `idem.begin` decided for this request."""

    EXECUTED = "executed"  # this caller owns the record and must call downstream
    REPLAYED = "replayed"  # final: SUCCESS with its response, or a FAILED that may not run again
    IN_PROGRESS = "in_progress"  # PROCESSING or UNKNOWN: do not call downstream
    PAYLOAD_MISMATCH = "payload_mismatch"  # same key, different request
    REJECTED = "rejected"  # the business object succeeded, is in flight, or its side effect is recorded, under another key
    RETIRED = "retired"  # the key was used and its record removed by retention


class RecordStatus(str, enum.Enum):
    PROCESSING = "PROCESSING"
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"  # the side effect may or may not have happened


class ResultCode(str, enum.Enum):
    """The answer of complete / fail / mark_unknown."""

    OK = "ok"
    CONFLICT = "conflict"  # the version moved on: someone else changed the record
    INVALID_TRANSITION = "invalid_transition"
    NOT_FOUND = "not_found"
    NOT_CLAIMANT = "not_claimant"  # the claim token does not match
    LEASE_ACTIVE = "lease_active"
    SIDE_EFFECT_RECORDED = "side_effect_recorded"  # FAILED refused: the ledger records the side effect
