"""The correct use of the protocol around one tool call, so that it is the easy one (blocking code;
`async_guard.AsyncGuard` is the same for asyncio).

    guard = Guard("host=... dbname=...")

    @guard.tool(biz_type="payment", tool="pay", biz_id="order_id")
    def pay(order_id: str, amount_minor: int, currency: str) -> dict:
        return gateway.charge(...)   # runs only when this call owns the key

    with call_context(trigger_source="llm", trace_id=run.trace_id, agent_id="checkout-agent"):
        pay(order_id="order-42", amount_minor=2990, currency="CNY")

What each answer of the protocol leads to is decided in flow.py, once for both guards; this file
performs the steps on a connection and builds the key from the tool's arguments.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import inspect
import threading
from typing import Any, Callable, Iterator, Optional, Union

import psycopg

from .call import CallContext, Failure, ToolCall, ToolResult, current_context
from .flow import Flow, Step, as_json, guarded_call
from .keys import stable_key
from .protocol import DEFAULT_LEASE, Protocol

Connector = Union[str, Callable[[], psycopg.Connection], Any]
Classifier = Callable[[BaseException], Optional[Failure]]


class Guard:
    """Runs tool calls under the protocol. Thread-safe.

    `connect` is one of: a libpq DSN or a function returning a new connection (the guard keeps one
    connection per thread), or a pool with psycopg_pool's `connection()` context manager (each
    protocol step borrows a connection; none is held while the tool body runs).
    `classify` maps a tool body's exception to how it is reported (default: `default_classify`);
    return None from it to fall back to the default.
    """

    def __init__(self, connect: Connector, *, lease: datetime.timedelta = DEFAULT_LEASE, classify: Optional[Classifier] = None):
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

    def run(self, call: ToolCall, body: Callable[[], Any]) -> ToolResult:
        """Claims `call.key`, runs `body` only if this call owns it, reports what happened."""
        return self._drive(guarded_call(call, self._classify), body)

    def _drive(self, flow: Flow, body: Callable[[], Any]) -> ToolResult:
        answer: Any = None
        failure: Optional[BaseException] = None
        while True:
            try:
                step, args = flow.throw(failure) if failure is not None else flow.send(answer)
            except StopIteration as done:
                return done.value
            answer, failure = None, None
            try:
                answer = body() if step is Step.BODY else self._perform(step, args)
            except BaseException as exc:  # noqa: BLE001 - the flow decides what each failure means
                failure = exc

    def _perform(self, step: Step, args: tuple) -> Any:
        with self.session() as protocol:
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
            spec = ToolSpec(biz_type, biz_id, tool or fn.__name__, attempt, payload, lease or self.lease)
            return GuardedTool(self, fn, spec)

        return wrap


@dataclasses.dataclass(frozen=True)
class ToolSpec:
    """How a wrapped tool's arguments become its ToolCall: the key from the business object."""

    biz_type: str
    biz_id: Union[str, Callable[[dict], str]]
    tool: str
    attempt: Union[int, str, Callable[[dict], int]]
    payload: Optional[Callable[[dict], Any]]
    lease: datetime.timedelta

    @staticmethod
    def _pick(rule, arguments: dict):
        if callable(rule):
            return rule(arguments)
        if isinstance(rule, str):
            return arguments[rule]
        return rule

    def call_for(self, signature: inspect.Signature, args: tuple, kwargs: dict, context: Optional[CallContext]) -> ToolCall:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        biz_id = str(self._pick(self.biz_id, arguments))
        attempt = self._pick(self.attempt, arguments)
        return ToolCall(
            key=stable_key(self.biz_type, biz_id, self.tool, attempt),
            biz_type=self.biz_type,
            biz_id=biz_id,
            tool=self.tool,
            payload=as_json(self.payload(arguments) if self.payload else arguments),
            context=context or current_context(),
            lease=self.lease,
        )


class GuardedTool:
    """A tool function under a Guard. Calling it returns the response or raises an IdemError;
    `.run(...)` returns the ToolResult instead."""

    def __init__(self, guard: Guard, fn: Callable[..., Any], spec: ToolSpec):
        self.guard, self.fn, self.spec = guard, fn, spec
        self.tool_name = spec.tool
        self._signature = inspect.signature(fn)
        functools.update_wrapper(self, fn)

    def call_for(self, args: tuple, kwargs: dict, context: Optional[CallContext] = None) -> ToolCall:
        return self.spec.call_for(self._signature, args, kwargs, context)

    def run(self, *args: Any, context: Optional[CallContext] = None, **kwargs: Any) -> ToolResult:
        return self.guard.run(self.call_for(args, kwargs, context), lambda: self.fn(*args, **kwargs))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.run(*args, **kwargs).unwrap()
