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
from .gateway_refs import adyen_merchant_reference, sepa_end_to_end_id, stripe_metadata
from .keys import compact_key, mcp_meta, stable_key, tool_call_key
from .protocol import (
    AsyncProtocol,
    BeginResult,
    CallbackResult,
    ChangeResult,
    Claim,
    Protocol,
    ProtocolMisuse,
    ingest_callback,
)
from .vocabulary import FundFlowKind, Outcome, RecordStatus, ResultCode, StatementLineResult, TriggerSource

__version__ = "0.1.0"

__all__ = [n for n, v in dict(globals()).items() if not n.startswith("_") and not isinstance(v, _types.ModuleType)]
