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
import time
from typing import Any, Callable, Generic, Iterator, Optional, TypeVar, Union

import psycopg

from .call import CallContext, ToolCall, ToolResult, current_context
from .flow import RESEND_PAUSES, Classifier, Driver, Step, as_json, guarded_call, perform
from .keys import stable_key
from .protocol import DEFAULT_LEASE, Protocol

Connector = Union[str, Callable[[], psycopg.Connection], Any]
_Tool = TypeVar("_Tool")


class GuardBase(Generic[_Tool]):
    """What Guard and AsyncGuard share: how `connect` is read (a DSN, a function returning a new
    connection, or a pool with a `connection()` context manager), the lease, the classifier, the
    flow each call runs and the `tool` decorator. A subclass says how a DSN is opened (`_open`) and
    what a wrapped tool is (`_wrap`), and performs the steps."""

    def __init__(self, connect: Any, *, lease: datetime.timedelta, classify: Optional[Classifier]):
        self._pool = None
        if isinstance(connect, str):
            self._connect = functools.partial(self._open, connect)
        elif callable(getattr(connect, "connection", None)):
            self._pool = connect
        else:
            self._connect = connect
        self.lease = lease
        self._classify = classify
        # The pauses before each new send of a protocol call whose connection broke (a failover):
        # about 16 s in all by default; () sends each call once.
        self.resend_pauses: tuple[float, ...] = RESEND_PAUSES

    @staticmethod
    def _open(dsn: str) -> Any:
        raise NotImplementedError

    def _wrap(self, fn: Callable[..., Any], spec: ToolSpec, **options: Any) -> _Tool:
        raise NotImplementedError

    def _driver(self, call: ToolCall) -> Driver:
        return Driver(guarded_call(call, self._classify, self.resend_pauses))

    def tool(
        self,
        *,
        biz_type: str,
        biz_id: Union[str, Callable[[dict], str]],
        tool: Optional[str] = None,
        attempt: Union[int, str, Callable[[dict], int]] = 1,
        payload: Optional[Callable[[dict], Any]] = None,
        lease: Optional[datetime.timedelta] = None,
        **options: Any,
    ) -> Callable[[Callable[..., Any]], _Tool]:
        """Wraps a tool function. `biz_id` and `attempt` are an argument's name or a function of the
        arguments; the key is `stable_key(biz_type, biz_id, tool, attempt)`, never per retry.
        `payload` picks the request that must repeat exactly (default: all arguments). `options`
        are the guard's own (AsyncGuard: `timeout`, the body's answer deadline; Guard: none)."""

        def wrap(fn: Callable[..., Any]) -> _Tool:
            spec = ToolSpec(biz_type, biz_id, tool or fn.__name__, attempt, payload, lease or self.lease)
            return self._wrap(fn, spec, **options)

        return wrap


class Guard(GuardBase["GuardedTool"]):
    """Runs tool calls under the protocol. Thread-safe.

    `connect` is one of: a libpq DSN or a function returning a new connection (the guard keeps one
    connection per thread), or a pool with psycopg_pool's `connection()` context manager (each
    protocol step borrows a connection; none is held while the tool body runs).
    `classify` maps a tool body's exception to how it is reported (default: `default_classify`);
    return None from it to fall back to the default.
    """

    def __init__(self, connect: Connector, *, lease: datetime.timedelta = DEFAULT_LEASE, classify: Optional[Classifier] = None):
        super().__init__(connect, lease=lease, classify=classify)
        self._local = threading.local()

    @staticmethod
    def _open(dsn: str) -> psycopg.Connection:
        return psycopg.connect(dsn, autocommit=True)

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
        driver = self._driver(call)
        for step, args in driver:
            with driver.answering() as answer:
                answer.value = body() if step is Step.BODY else self._perform(step, args)
        return driver.result

    def _perform(self, step: Step, args: tuple) -> Any:
        if step is Step.PAUSE:
            time.sleep(args[0])
            return None
        with self.session() as protocol:
            return perform(protocol, step, args)

    def _wrap(self, fn: Callable[..., Any], spec: ToolSpec) -> GuardedTool:
        return GuardedTool(self, fn, spec)


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


class GuardedToolBase:
    """A tool function under a guard, and how its arguments become the ToolCall (`call_for`)."""

    def __init__(self, guard: GuardBase[Any], fn: Callable[..., Any], spec: ToolSpec):
        self.guard, self.fn, self.spec = guard, fn, spec
        self.tool_name = spec.tool
        self._signature = inspect.signature(fn)
        functools.update_wrapper(self, fn)

    def call_for(self, args: tuple, kwargs: dict, context: Optional[CallContext] = None) -> ToolCall:
        return self.spec.call_for(self._signature, args, kwargs, context)


class GuardedTool(GuardedToolBase):
    """A tool function under a Guard. Calling it returns the response or raises an IdemError;
    `.run(...)` returns the ToolResult instead."""

    guard: Guard

    def run(self, *args: Any, context: Optional[CallContext] = None, **kwargs: Any) -> ToolResult:
        return self.guard.run(self.call_for(args, kwargs, context), lambda: self.fn(*args, **kwargs))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.run(*args, **kwargs).unwrap()

