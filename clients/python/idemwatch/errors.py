"""What a guarded tool call can end in, as exception types, and what a tool body raises to say how
its side effect failed.

Two families reach the caller:
- `DoNotRetry`: running the same request again could charge twice or is pointless. Hand
  `for_model()` back to the model instead of calling the tool again.
- `MayRetry`: nothing reached downstream; the same call (same key) may be sent again.

A tool body says how it failed by raising `BusinessFailure` (definite: card declined; final),
`NotSent` (certainly never reached downstream: connection refused before sending) or
`ResponseTimeout` (sent, no answer: the outcome is unknown). Anything else it raises is treated as
unknown too: an exception after sending proves nothing about what the downstream did.
"""

from __future__ import annotations

from typing import Any, Optional

from .protocol import ChangeResult
from .vocabulary import RecordStatus


# --- raised by a tool body -------------------------------------------------------------------------


class BusinessFailure(Exception):
    """A definite failure from downstream (insufficient balance, card declined): final, not retried."""


class NotSent(Exception):
    """The request certainly never reached downstream (connection refused before sending)."""


class ResponseTimeout(Exception):
    """The request was sent and no answer came: the side effect may or may not have happened."""


# --- raised to the caller --------------------------------------------------------------------------


class IdemError(Exception):
    """A guarded call that did not produce a response. `key` names the record."""

    def __init__(self, message: str, *, key: str, tool: str, status: Optional[RecordStatus] = None):
        super().__init__(message)
        self.key = key
        self.tool = tool
        self.status = status

    def for_model(self) -> str:
        """One sentence to hand back to the model as the tool's result."""
        return str(self)


class DoNotRetry(IdemError):
    """Do not send this request again: it would not run, or running it could repeat a side effect."""


class MayRetry(IdemError):
    """Nothing reached downstream: the same call, with the same key, may be sent again."""


class InProgress(DoNotRetry):
    """Another caller holds the record (PROCESSING), or its outcome is unknown (UNKNOWN)."""


class OutcomeUnknown(DoNotRetry):
    """This call's side effect was sent and its answer never came; the record is now UNKNOWN."""


class FinalFailure(DoNotRetry):
    """A definite failure, now or stored from before (replayed FAILED): change the plan, do not retry."""

    def __init__(self, message: str, *, error: str, replayed: bool, **kwargs: Any):
        super().__init__(message, **kwargs)
        self.error = error
        self.replayed = replayed


class Refused(DoNotRetry):
    """The layer refused the request before anything ran."""


class Retired(Refused):
    """The key was used and its record since removed by retention: it never runs again."""


class Rejected(Refused):
    """The business object already succeeded, is in flight, or money moved for it, under another key."""


class PayloadMismatch(Refused):
    """The same key came with a different request: a bug upstream (a key reused for another intent)."""


class NotRecorded(DoNotRetry):
    """The side effect ran (this call owns the record) but its outcome could not be written.

    `response` is what downstream answered, when it answered. The record stays with its lease, then
    becomes UNKNOWN for the reconciler or a person; a retry is never executed.
    """

    def __init__(self, message: str, *, response: Any, report: Optional[ChangeResult], **kwargs: Any):
        super().__init__(message, **kwargs)
        self.response = response
        self.report = report


class RetryableFailure(MayRetry):
    """The tool body said the request never reached downstream; the record allows a retry."""


class Unavailable(MayRetry):
    """The idempotency layer could not be reached to claim the key; nothing was sent downstream."""
