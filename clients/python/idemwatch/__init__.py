"""idemwatch: call the idem protocol (docs/contract/schema.md, version 2) correctly from Python."""

from .errors import (
    BusinessFailure,
    DoNotRetry,
    FinalFailure,
    IdemError,
    InProgress,
    MayRetry,
    NotRecorded,
    NotSent,
    OutcomeUnknown,
    PayloadMismatch,
    Refused,
    Rejected,
    ResponseTimeout,
    Retired,
    RetryableFailure,
    Unavailable,
)
from .guard import CallContext, Failure, Guard, GuardedTool, ToolCall, ToolResult, call_context, current_context
from .keys import stable_key
from .protocol import BeginResult, ChangeResult, Claim, Protocol, ProtocolMisuse
from .vocabulary import Outcome, RecordStatus, ResultCode, TriggerSource

__version__ = "0.1.0"

__all__ = [name for name in dir() if not name.startswith("_")]
