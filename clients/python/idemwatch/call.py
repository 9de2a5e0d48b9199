"""What a guarded call is made of: the request (ToolCall), who sent it and why (CallContext), how it
ended (ToolResult), and how a tool body's exception is reported (Failure)."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import datetime
import enum
from typing import Any, Iterator, Optional, Union

from . import errors
from .protocol import DEFAULT_LEASE
from .vocabulary import Outcome, TriggerSource


@dataclasses.dataclass(frozen=True)
class CallContext:
    """Who sent this call and why, as the caller knows it; stored in idem.attempts."""

    trigger_source: TriggerSource = TriggerSource.INITIAL
    trace_id: Optional[str] = None
    agent_id: Optional[str] = None


_current_context: contextvars.ContextVar[CallContext] = contextvars.ContextVar(
    "idemwatch_call_context", default=CallContext()
)


@contextlib.contextmanager
def call_context(
    trigger_source: Union[TriggerSource, str] = TriggerSource.INITIAL,
    trace_id: Optional[str] = None,
    agent_id: Optional[str] = None,
) -> Iterator[CallContext]:
    """States the trigger source, trace id and agent id for the guarded calls made inside (a
    context variable: asyncio tasks started inside inherit it, new threads do not)."""
    ctx = CallContext(TriggerSource(trigger_source), trace_id, agent_id)
    token = _current_context.set(ctx)
    try:
        yield ctx
    finally:
        _current_context.reset(token)


def current_context() -> CallContext:
    return _current_context.get()


@dataclasses.dataclass(frozen=True)
class ToolCall:
    """One request to a side-effecting tool, as idem.begin needs it."""

    key: str
    biz_type: str
    biz_id: str
    tool: str
    payload: Any
    context: CallContext = CallContext()
    lease: datetime.timedelta = DEFAULT_LEASE
    request_hash: Optional[str] = None  # None: the database hashes the payload


@dataclasses.dataclass(frozen=True)
class ToolResult:
    """How a guarded call ended: a response, or the error that says why there is none."""

    key: str
    outcome: Optional[Outcome]  # what begin answered; None when begin could not be reached
    executed: bool  # this call ran the side effect
    response: Any = None
    error: Optional[errors.IdemError] = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def unwrap(self) -> Any:
        """The response, or raises the error."""
        if self.error is not None:
            raise self.error
        return self.response


class Failure(enum.Enum):
    """How a tool body's exception is reported."""

    FINAL = "final"  # fail(retry_allowed=False)
    NOT_SENT = "not_sent"  # fail(retry_allowed=True)
    UNKNOWN = "unknown"  # mark_unknown


def default_classify(exc: BaseException) -> Failure:
    if isinstance(exc, errors.BusinessFailure):
        return Failure.FINAL
    if isinstance(exc, (errors.NotSent, ConnectionRefusedError)):
        return Failure.NOT_SENT
    # A timeout, or anything else: the request may have reached downstream and done its work.
    return Failure.UNKNOWN
