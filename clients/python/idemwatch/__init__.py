"""idemwatch: call the idem protocol (docs/contract/schema.md, version 3) correctly from Python."""

import types as _types

from .async_guard import AsyncGuard, AsyncGuardedTool
from .call import CallContext, Failure, ToolCall, ToolResult, call_context, current_context, default_classify
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
from .guard import Guard, GuardedTool, ToolSpec
from .keys import stable_key
from .protocol import AsyncProtocol, BeginResult, ChangeResult, Claim, Protocol, ProtocolMisuse
from .vocabulary import Outcome, RecordStatus, ResultCode, TriggerSource

__version__ = "0.1.0"

__all__ = [n for n, v in dict(globals()).items() if not n.startswith("_") and not isinstance(v, _types.ModuleType)]
