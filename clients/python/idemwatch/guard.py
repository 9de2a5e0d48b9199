"""The correct use of the protocol around one tool call, so that it is the easy one.

    guard = Guard("host=... dbname=...")

    @guard.tool(biz_type="payment", tool="pay", biz_id="order_id")
    def pay(order_id: str, amount_minor: int, currency: str) -> dict:
        return gateway.charge(...)   # runs only when this call owns the key

    with call_context(trigger_source="llm", trace_id=run.trace_id, agent_id="checkout-agent"):
        pay(order_id="order-42", amount_minor=2990, currency="CNY")

What each answer of `idem.begin` leads to:
- executed: the body runs once; its return value is stored (`complete`) and returned.
  It raises BusinessFailure -> final `fail`, the caller gets FinalFailure;
  NotSent (or ConnectionRefusedError) -> `fail(retry_allowed=True)`, the caller gets RetryableFailure;
  anything else (a timeout above all) -> `mark_unknown`, the caller gets OutcomeUnknown.
- replayed SUCCESS: the stored response is returned, the body does not run.
- replayed FAILED: FinalFailure with the stored error, for the model; the body does not run.
- in_progress: InProgress ("do not retry"); retired / rejected / payload_mismatch: Refused.
- a report answered `conflict` because the lease ran out and the record became UNKNOWN: the
  claimant re-reads the version the answer carries and reports again (its answer came late);
  the body is never run again. Any other refused report: NotRecorded, never a re-run.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import datetime
import enum
import functools
import inspect
import json
import threading
from typing import Any, Callable, Iterator, Optional, Union

import psycopg

from . import errors
from .keys import stable_key
from .protocol import DEFAULT_LEASE, BeginResult, Claim, Protocol
from .vocabulary import Outcome, RecordStatus, ResultCode, TriggerSource


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
    """States the trigger source, trace id and agent id for the guarded calls made inside."""
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


Connector = Union[str, Callable[[], psycopg.Connection], Any]


class Guard:
    """Runs tool calls under the protocol. Thread-safe.

    `connect` is one of: a libpq DSN or a function returning a new connection (the guard keeps one
    connection per thread), or a pool with psycopg_pool's `connection()` context manager (each
    protocol step borrows a connection; none is held while the tool body runs).
    `classify` maps a tool body's exception to how it is reported (default: `default_classify`);
    return None from it to fall back to the default.
    """

    def __init__(
        self,
        connect: Connector,
        *,
        lease: datetime.timedelta = DEFAULT_LEASE,
        classify: Optional[Callable[[BaseException], Optional[Failure]]] = None,
    ):
        self._pool = None
        if isinstance(connect, str):
            dsn = connect
            self._connect: Callable[[], psycopg.Connection] = lambda: psycopg.connect(dsn, autocommit=True)
        elif callable(getattr(connect, "connection", None)):
            self._pool = connect
        else:
            self._connect = connect
        self.lease = lease
        self._classify = classify
        self._local = threading.local()

    # --- connections --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def session(self) -> Iterator[Protocol]:
        """The protocol on a connection for one step (claim, or report)."""
        if self._pool is not None:
            with self._pool.connection() as conn:
                yield Protocol(conn)
            return
        conn = getattr(self._local, "connection", None)
        if conn is None or conn.closed or conn.broken:
            conn = self._connect()
            self._local.connection = conn
        yield Protocol(conn)

    def close(self) -> None:
        """Closes this thread's connection (others close when their thread's Guard use ends)."""
        conn = getattr(self._local, "connection", None)
        if conn is not None:
            conn.close()
            self._local.connection = None

    # --- one call ------------------------------------------------------------------------------------

    def run(self, call: ToolCall, body: Callable[[], Any]) -> ToolResult:
        """Claims `call.key`, runs `body` only if this call owns it, reports what happened."""
        where = dict(key=call.key, tool=call.tool)
        subject = f"{call.tool} for {call.biz_type} {call.biz_id}"
        try:
            with self.session() as protocol:
                begun = protocol.begin(
                    call.key,
                    call.biz_type,
                    call.biz_id,
                    call.tool,
                    trigger_source=call.context.trigger_source,
                    payload=call.payload,
                    request_hash=call.request_hash,
                    lease=call.lease,
                    agent_id=call.context.agent_id,
                    trace_id=call.context.trace_id,
                )
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            # The layer is unreachable. Any other database error (a bound, a missing grant) is a
            # deterministic refusal of this request and is raised as it is.
            unavailable = errors.Unavailable(
                f"{subject}: the idempotency layer could not claim key {call.key!r} ({exc}); "
                "nothing was sent, the same call may be retried",
                **where,
            )
            return ToolResult(call.key, None, False, None, unavailable)

        if begun.outcome is Outcome.EXECUTED:
            return self._execute(call, begun, body, subject)
        error = self._not_executed(begun, subject, where)
        response = begun.response_payload if error is None else None
        return ToolResult(call.key, begun.outcome, False, response, error)

    def _not_executed(self, begun: BeginResult, subject: str, where: dict) -> Optional[errors.IdemError]:
        status = begun.status
        if begun.outcome is Outcome.REPLAYED:
            if status is RecordStatus.SUCCESS:
                return None
            error = error_text(begun.response_payload)
            return errors.FinalFailure(
                f"{subject} failed before, definitively: {error}. It will not run again with this "
                "request; change the plan (another method, ask the user) instead of retrying",
                error=error,
                replayed=True,
                status=status,
                **where,
            )
        if begun.outcome is Outcome.IN_PROGRESS:
            state = (
                "its outcome is uncertain (UNKNOWN)"
                if status is RecordStatus.UNKNOWN
                else "it is in progress (PROCESSING)"
            )
            return errors.InProgress(
                f"{subject}: {state}. Do not retry: it may already have happened; the claimant, "
                "the reconciler or a person will settle it",
                status=status,
                **where,
            )
        if begun.outcome is Outcome.RETIRED:
            return errors.Retired(
                f"{subject}: key {where['key']!r} was used before and its record retired; it never runs again",
                status=status,
                **where,
            )
        if begun.outcome is Outcome.REJECTED:
            return errors.Rejected(
                f"{subject}: refused, the business object already succeeded, is in flight or money "
                "moved for it under another key; do not retry with a new key",
                status=status,
                **where,
            )
        return errors.PayloadMismatch(
            f"{subject}: key {where['key']!r} was used for a different request; the same key must "
            "carry the same request (a bug upstream), nothing ran",
            status=status,
            **where,
        )

    def _execute(self, call: ToolCall, begun: BeginResult, body: Callable[[], Any], subject: str) -> ToolResult:
        claim = Claim(call.key, int(begun.version), begun.claim_token)
        where = dict(key=call.key, tool=call.tool)
        try:
            response = body()
        except BaseException as exc:  # noqa: BLE001 - every ending of the body must be reported
            failure = (self._classify(exc) if self._classify else None) or default_classify(exc)
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            error = self._report_failure(claim, failure, reason, subject, where)
            if not isinstance(exc, Exception):
                raise  # KeyboardInterrupt, SystemExit: reported as unknown, then let through
            error.__cause__ = exc
            return ToolResult(call.key, Outcome.EXECUTED, True, None, error)

        try:
            stored = _as_json(response)
            with self.session() as protocol:
                report = protocol.complete(claim.key, claim.version, stored, claim.token)
                if report.result is ResultCode.CONFLICT and report.status is RecordStatus.UNKNOWN and report.version:
                    # The lease ran out while downstream answered and the sweeper made it UNKNOWN:
                    # the claimant's late answer is still the answer (UNKNOWN -> SUCCESS by it).
                    report = protocol.complete(claim.key, report.version, stored, claim.token)
        except Exception as exc:  # noqa: BLE001 - after the side effect, nothing may turn into a re-run
            return ToolResult(
                call.key,
                Outcome.EXECUTED,
                True,
                response,
                errors.NotRecorded(
                    f"{subject} ran, but its result could not be recorded ({exc}); do not retry: the "
                    "record will become UNKNOWN for the reconciler or a person",
                    response=response,
                    report=None,
                    **where,
                ),
            )
        if report.ok:
            return ToolResult(call.key, Outcome.EXECUTED, True, response)
        return ToolResult(
            call.key,
            Outcome.EXECUTED,
            True,
            response,
            errors.NotRecorded(
                f"{subject} ran, but the layer refused its result ({report.result.value}, record now "
                f"{report.status.value if report.status else 'absent'}); do not retry",
                response=response,
                report=report,
                status=report.status,
                **where,
            ),
        )

    def _report_failure(
        self, claim: Claim, failure: Failure, reason: str, subject: str, where: dict
    ) -> errors.IdemError:
        try:
            with self.session() as protocol:
                if failure is Failure.UNKNOWN:
                    report = protocol.mark_unknown(claim.key, claim.version, reason, claim.token)
                    # Already UNKNOWN (the sweeper was first) is the state we asked for.
                    recorded = report.ok or (
                        report.result is ResultCode.CONFLICT and report.status is RecordStatus.UNKNOWN
                    )
                else:
                    retry = failure is Failure.NOT_SENT
                    report = protocol.fail(claim.key, claim.version, reason, claim.token, retry_allowed=retry)
                    recorded = report.ok
        except psycopg.Error as exc:
            recorded, reason = False, f"{reason}; reporting it failed: {exc}"

        if failure is Failure.UNKNOWN or not recorded:
            # Not recorded as a failure: the lease runs out and the record becomes UNKNOWN, the same
            # end as a timeout, so the caller hears the same thing.
            return errors.OutcomeUnknown(
                f"{subject}: the outcome is unknown ({reason}). Do not retry: it may have happened; "
                "the reconciler or a person will settle it",
                status=RecordStatus.UNKNOWN,
                **where,
            )
        if failure is Failure.FINAL:
            return errors.FinalFailure(
                f"{subject} failed definitively: {reason}. Do not retry the same request; change the plan",
                error=reason,
                replayed=False,
                status=RecordStatus.FAILED,
                **where,
            )
        return errors.RetryableFailure(
            f"{subject} was not sent ({reason}); the same call may be retried with the same key",
            status=RecordStatus.FAILED,
            **where,
        )

    # --- the decorator -------------------------------------------------------------------------------

    def tool(
        self,
        *,
        biz_type: str,
        biz_id: Union[str, Callable[[dict], str]],
        tool: Optional[str] = None,
        attempt: Union[int, str, Callable[[dict], int]] = 1,
        payload: Optional[Callable[[dict], Any]] = None,
        lease: Optional[datetime.timedelta] = None,
    ) -> Callable[[Callable[..., Any]], "GuardedTool"]:
        """Wraps a tool function. `biz_id` and `attempt` are an argument's name or a function of the
        arguments; the key is `stable_key(biz_type, biz_id, tool, attempt)`, never per retry.
        `payload` picks the request that must repeat exactly (default: all arguments)."""

        def wrap(fn: Callable[..., Any]) -> GuardedTool:
            return GuardedTool(self, fn, biz_type, biz_id, tool or fn.__name__, attempt, payload, lease or self.lease)

        return wrap


class GuardedTool:
    """A tool function under a Guard. Calling it returns the response or raises an IdemError;
    `.run(...)` returns the ToolResult instead."""

    def __init__(self, guard, fn, biz_type, biz_id, tool, attempt, payload, lease):
        self.guard, self.fn, self.biz_type, self.tool_name = guard, fn, biz_type, tool
        self._biz_id, self._attempt, self._payload, self.lease = biz_id, attempt, payload, lease
        self._signature = inspect.signature(fn)
        functools.update_wrapper(self, fn)

    def _pick(self, rule, arguments: dict):
        if callable(rule):
            return rule(arguments)
        if isinstance(rule, str):
            return arguments[rule]
        return rule

    def call_for(self, args: tuple, kwargs: dict, context: Optional[CallContext] = None) -> ToolCall:
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        biz_id = str(self._pick(self._biz_id, arguments))
        attempt = self._pick(self._attempt, arguments)
        payload = self._payload(arguments) if self._payload else arguments
        return ToolCall(
            key=stable_key(self.biz_type, biz_id, self.tool_name, attempt),
            biz_type=self.biz_type,
            biz_id=biz_id,
            tool=self.tool_name,
            payload=_as_json(payload),
            context=context or current_context(),
            lease=self.lease,
        )

    def run(self, *args: Any, context: Optional[CallContext] = None, **kwargs: Any) -> ToolResult:
        call = self.call_for(args, kwargs, context)
        return self.guard.run(call, lambda: self.fn(*args, **kwargs))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.run(*args, **kwargs).unwrap()


def error_text(payload: Any) -> str:
    """The stored error of a FAILED record, whatever JSON shape the server gives it."""
    if payload is None:
        return "the error was not stored"
    if isinstance(payload, str):
        return payload
    if isinstance(payload, dict):
        for name in ("error", "last_error", "reason", "message"):
            if isinstance(payload.get(name), str):
                return payload[name]
    return json.dumps(payload, sort_keys=True)


def _as_json(value: Any) -> Any:
    # What the database stores: JSON. A Decimal or a datetime becomes its text rather than making the
    # report fail after the money moved.
    return json.loads(json.dumps(value, default=str))
