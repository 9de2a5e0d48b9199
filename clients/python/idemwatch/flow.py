"""The one decision procedure of a guarded call, written once for the blocking and the asyncio guard.

`guarded_call` is a generator that never touches a connection: it yields each step it needs (claim
the key, run the body, report); a `Driver` hands each step to the guard (`Guard` or `AsyncGuard`),
which performs it (`perform` maps a step to its protocol call), and sends the answer back, or
throws the step's exception in. The guards differ only in blocking or awaiting. So what each answer
of the protocol leads to is decided in this file only:

- executed: the body runs once; its return value is stored (complete) and returned.
  It raises BusinessFailure -> final fail, the caller gets FinalFailure;
  NotSent (or ConnectionRefusedError) -> fail(retry_allowed => true), the caller gets RetryableFailure;
  anything else (a timeout above all) -> mark_unknown, the caller gets OutcomeUnknown.
- replayed SUCCESS: the stored response; the body does not run.
- replayed FAILED: FinalFailure with the stored error, for the model; the body does not run.
- in_progress: InProgress ("do not retry"); retired / rejected / payload_mismatch: Refused.
- a report answered `conflict` because the lease ran out and the record became UNKNOWN: the
  claimant reports again at the version the answer carries (its answer came late); the body is
  never run again. Any other refused report, or an error after the body ran: NotRecorded.
- executed, but the answer arrived after the lease ran out (counted from the claim's send: a commit
  that waited for a synchronous standby, a stalled connection): meanwhile the record looked
  abandoned and a person may have settled it, so the body does not run. The claim is given back
  (fail with retry_allowed: it certainly never went downstream) and the caller gets
  RetryableFailure; a retry with the same key is answered by the record.
- a call whose connection broke (a failover, a reset) may or may not have committed: it is sent
  again, the same call with the same key, token and version, after a pause, for about 16 seconds
  (longer than a failover takes). A claim answers from the record (executed if the first never
  committed, in_progress if it did); a report answers `ok`, or `conflict` with the state its first
  send already reached, which counts as recorded. Never a second run of the body.
"""

from __future__ import annotations

import enum
import json
import time
from typing import Any, Callable, Generator, Iterator, Optional

import psycopg

from . import errors
from .call import Failure, ToolCall, ToolResult, default_classify
from .protocol import BeginResult, ChangeResult, Claim
from .vocabulary import Outcome, RecordStatus, ResultCode


class Step(enum.Enum):
    BEGIN = "begin"  # args: the ToolCall
    BODY = "body"  # args: none; the answer is the body's return value
    COMPLETE = "complete"  # args: claim, version, stored response
    FAIL = "fail"  # args: claim, reason, retry_allowed
    MARK_UNKNOWN = "mark_unknown"  # args: claim, reason
    PAUSE = "pause"  # args: seconds; the guard sleeps (or awaits) before a call is sent again


Flow = Generator[tuple, Any, ToolResult]
Classifier = Callable[[BaseException], Optional[Failure]]

# The layer is unreachable: nothing ran. Any other database error of begin (a bound, a missing
# grant) is a deterministic refusal of this request and reaches the caller as it is.
UNREACHABLE = (psycopg.OperationalError, psycopg.InterfaceError)

# The pauses before each new send of a call whose connection broke: about 16 s in all.
RESEND_PAUSES = (0.2, 0.5, 1.0, 2.0, 4.0, 8.0)


def sent(step: Step, args: tuple, pauses: tuple[float, ...]) -> Generator[tuple, Any, tuple[Any, bool]]:
    """The step's answer, sending it again after each pause while its connection breaks; and
    whether it was sent more than once (then its first send may have committed)."""
    for n, pause in enumerate(pauses):
        try:
            return (yield step, args), n > 0
        except UNREACHABLE:
            yield Step.PAUSE, (pause,)
    return (yield step, args), len(pauses) > 0


def claimed(call: ToolCall, pauses: tuple[float, ...]) -> Generator[tuple, Any, tuple[BeginResult, float]]:
    """begin's answer, sent again after each pause while its connection breaks; and the seconds
    from its last send to its answer (the lease runs from no earlier than that send)."""
    for pause in pauses:
        started = time.monotonic()
        try:
            return (yield Step.BEGIN, (call,)), time.monotonic() - started
        except UNREACHABLE:
            yield Step.PAUSE, (pause,)
    started = time.monotonic()
    return (yield Step.BEGIN, (call,)), time.monotonic() - started


def reached(report: ChangeResult, resent: bool, status: RecordStatus) -> bool:
    """A report recorded: `ok`, or, sent again, `conflict` with the state the first send reached."""
    return report.ok or (resent and report.result is ResultCode.CONFLICT and report.status is status)


def guarded_call(call: ToolCall, classify: Optional[Classifier], pauses: tuple[float, ...] = RESEND_PAUSES) -> Flow:
    where = dict(key=call.key, tool=call.tool)
    subject = f"{call.tool} for {call.biz_type} {call.biz_id}"
    try:
        begun, took = yield from claimed(call, pauses)
    except UNREACHABLE as exc:
        unavailable = errors.Unavailable(
            f"{subject}: the idempotency layer could not claim key {call.key!r} ({exc}); "
            "nothing was sent, the same call may be retried",
            **where,
        )
        return ToolResult(call.key, None, False, None, unavailable)

    if begun.outcome is not Outcome.EXECUTED:
        error = not_executed(begun, subject, where)
        response = begun.response_payload if error is None else None
        return ToolResult(call.key, begun.outcome, False, response, error)

    claim = Claim(call.key, int(begun.version), begun.claim_token)
    lease = call.lease.total_seconds()
    if took >= lease:
        reason = f"the claim was acknowledged {took:.1f}s after it was sent, past its {lease:g}s lease; not sent downstream"
        try:
            yield from sent(Step.FAIL, (claim, reason, True), pauses)
        except Exception:  # noqa: BLE001 - the body never ran: the record's own answer decides a retry
            pass
        late = errors.RetryableFailure(
            f"{subject} was not sent: {reason}. The same call may be retried with the same key",
            status=RecordStatus.FAILED,
            **where,
        )
        return ToolResult(call.key, Outcome.EXECUTED, False, None, late)
    try:
        response = yield Step.BODY, ()
    except BaseException as exc:  # noqa: BLE001 - every ending of the body must be reported
        failure = (classify(exc) if classify else None) or default_classify(exc)
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        try:
            if failure is Failure.UNKNOWN:
                report: ChangeResult
                report, _ = yield from sent(Step.MARK_UNKNOWN, (claim, reason), pauses)
                # Already UNKNOWN (the sweeper was first) is the state we asked for.
                recorded = reached(report, True, RecordStatus.UNKNOWN)
            else:
                report, resent = yield from sent(Step.FAIL, (claim, reason, failure is Failure.NOT_SENT), pauses)
                recorded = reached(report, resent, RecordStatus.FAILED)
        except Exception as report_exc:  # noqa: BLE001 - the record then ends UNKNOWN by its lease
            recorded, reason = False, f"{reason}; reporting it failed: {report_exc}"
        error = failure_error(failure, recorded, reason, subject, where)
        if not isinstance(exc, Exception):
            raise  # KeyboardInterrupt, SystemExit, a cancelled task: reported, then let through
        error.__cause__ = exc
        return ToolResult(call.key, Outcome.EXECUTED, True, None, error)

    try:
        stored = as_json(response)
        report, resent = yield from sent(Step.COMPLETE, (claim, claim.version, stored), pauses)
        if report.result is ResultCode.CONFLICT and report.status is RecordStatus.UNKNOWN and report.version:
            # The lease ran out while downstream answered and the sweeper made it UNKNOWN: the
            # claimant's late answer is still the answer (UNKNOWN -> SUCCESS by the claimant).
            report, again = yield from sent(Step.COMPLETE, (claim, report.version, stored), pauses)
            resent = resent or again
    except Exception as exc:  # noqa: BLE001 - after the side effect, nothing may turn into a re-run
        not_recorded = errors.NotRecorded(
            f"{subject} ran, but its result could not be recorded ({exc}); do not retry: the record "
            "will become UNKNOWN for the reconciler or a person",
            response=response,
            report=None,
            **where,
        )
        return ToolResult(call.key, Outcome.EXECUTED, True, response, not_recorded)
    if reached(report, resent, RecordStatus.SUCCESS):
        return ToolResult(call.key, Outcome.EXECUTED, True, response)
    refused = errors.NotRecorded(
        f"{subject} ran, but the layer refused its result ({report.result.value}, record now "
        f"{report.status.value if report.status else 'absent'}); do not retry",
        response=response,
        report=report,
        status=report.status,
        **where,
    )
    return ToolResult(call.key, Outcome.EXECUTED, True, response, refused)


class Answer:
    """What a step gave back: the guard performing it sets `value` inside `with driver.answering()`;
    leaving the block hands the value, or the exception that ended the block, to the driver."""

    __slots__ = ("_driver", "value")

    def __init__(self, driver: Driver):
        self._driver = driver
        self.value: Any = None

    def __enter__(self) -> Answer:
        return self

    def __exit__(self, kind: Any, exc: Optional[BaseException], traceback: Any) -> bool:
        if exc is None:
            self._driver._answer = self.value
        else:
            self._driver._failure = exc  # the flow decides what each failure means
        return True


class Driver:
    """Runs a flow to its end, the same loop for both guards: iterating gives each step the flow asks
    for; the guard performs it (blocking, or awaited: the only part that differs) inside
    `answering()`, which sends the step's value or its exception back into the flow. `result` is the
    ToolResult the flow returns; an exception the flow lets through (an interrupt) ends the loop."""

    def __init__(self, flow: Flow):
        self._flow = flow
        self._answer: Any = None
        self._failure: Optional[BaseException] = None
        self.result: Optional[ToolResult] = None

    def __iter__(self) -> Iterator[tuple[Step, tuple]]:
        while True:
            answer, failure = self._answer, self._failure
            self._answer, self._failure = None, None
            try:
                step = self._flow.throw(failure) if failure is not None else self._flow.send(answer)
            except StopIteration as done:
                self.result = done.value
                return
            yield step

    def answering(self) -> Answer:
        return Answer(self)


def perform(protocol: Any, step: Step, args: tuple) -> Any:
    """Calls the protocol function a step names with the step's arguments: on a Protocol, its
    answer; on an AsyncProtocol, the awaitable of it. The one mapping of steps to calls."""
    if step is Step.BEGIN:
        (call,) = args
        return protocol.begin(
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
    if step is Step.COMPLETE:
        claim, version, stored = args
        return protocol.complete(claim.key, version, stored, claim.token)
    if step is Step.FAIL:
        claim, reason, retry_allowed = args
        return protocol.fail(claim.key, claim.version, reason, claim.token, retry_allowed=retry_allowed)
    claim, reason = args
    return protocol.mark_unknown(claim.key, claim.version, reason, claim.token)


def not_executed(begun: BeginResult, subject: str, where: dict) -> Optional[errors.IdemError]:
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
        state = "its outcome is uncertain (UNKNOWN)" if status is RecordStatus.UNKNOWN else "it is in progress (PROCESSING)"
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


def failure_error(failure: Failure, recorded: bool, reason: str, subject: str, where: dict) -> errors.IdemError:
    if failure is Failure.UNKNOWN or not recorded:
        # Not recorded as a failure: the lease runs out and the record becomes UNKNOWN, the same end
        # as a timeout, so the caller hears the same thing.
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


def as_json(value: Any) -> Any:
    # What the database stores: JSON. A Decimal or a datetime becomes its text rather than making the
    # report fail after the money moved.
    return json.loads(json.dumps(value, default=str))
