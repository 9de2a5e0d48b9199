"""The guard for asyncio agent runtimes: the same decisions as Guard (flow.py), on psycopg's
AsyncConnection, with async tool bodies and an optional answer deadline.

    guard = AsyncGuard("host=... dbname=...")

    @guard.tool(biz_type="payment", biz_id="order_id", tool="pay", timeout=5.0)
    async def pay(order_id: str, amount_minor: int) -> dict:
        return await gateway.charge(order_id, amount_minor)

    with call_context(trigger_source="llm", trace_id=trace_id):
        await pay(order_id="order-42", amount_minor=2990)
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import inspect
from typing import Any, AsyncIterator, Awaitable, Callable, Optional, Union

import psycopg

from .call import CallContext, ToolCall, ToolResult
from .flow import Flow, Step, guarded_call
from .guard import Classifier, ToolSpec
from .protocol import DEFAULT_LEASE, AsyncProtocol

AsyncConnector = Union[str, Callable[[], Awaitable[psycopg.AsyncConnection]], Any]


class AsyncGuard:
    """Runs tool calls under the protocol from asyncio.

    `connect` is one of: a libpq DSN or an async function returning a new AsyncConnection (the guard
    keeps one, shared by its tasks: psycopg runs their statements one at a time), or a pool with
    psycopg_pool's AsyncConnectionPool `connection()` (each step borrows a connection; none is held
    while the tool body runs). `classify` as for Guard.
    """

    def __init__(self, connect: AsyncConnector, *, lease: datetime.timedelta = DEFAULT_LEASE, classify: Optional[Classifier] = None):
        self._pool = None
        if isinstance(connect, str):
            dsn = connect
            self._connect: Callable[[], Awaitable[psycopg.AsyncConnection]] = lambda: psycopg.AsyncConnection.connect(
                dsn, autocommit=True
            )
        elif callable(getattr(connect, "connection", None)):
            self._pool = connect
        else:
            self._connect = connect
        self.lease = lease
        self._classify = classify
        self._connection: Optional[psycopg.AsyncConnection] = None
        self._connecting = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncProtocol]:
        """The protocol on a connection for one step (claim, or report)."""
        if self._pool is not None:
            async with self._pool.connection() as conn:
                yield AsyncProtocol(conn)
            return
        async with self._connecting:
            conn = self._connection
            if conn is None or conn.closed or conn.broken:
                conn = self._connection = await self._connect()
        yield AsyncProtocol(conn)

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

    async def run(
        self, call: ToolCall, body: Callable[[], Any], *, timeout: Optional[float] = None
    ) -> ToolResult:
        """Claims `call.key`, runs `body` (async or not) only if this call owns it, reports what
        happened. Past `timeout` seconds the body is cancelled and the outcome is unknown."""
        return await self._drive(guarded_call(call, self._classify), body, timeout)

    async def _drive(self, flow: Flow, body: Callable[[], Any], timeout: Optional[float]) -> ToolResult:
        answer: Any = None
        failure: Optional[BaseException] = None
        while True:
            try:
                step, args = flow.throw(failure) if failure is not None else flow.send(answer)
            except StopIteration as done:
                return done.value
            answer, failure = None, None
            try:
                answer = await (self._body(body, timeout) if step is Step.BODY else self._perform(step, args))
            except BaseException as exc:  # noqa: BLE001 - the flow decides what each failure means
                failure = exc

    @staticmethod
    async def _body(body: Callable[[], Any], timeout: Optional[float]) -> Any:
        async def call() -> Any:
            result = body()
            return await result if inspect.isawaitable(result) else result

        if timeout is None:
            return await call()
        try:
            return await asyncio.wait_for(call(), timeout)
        except asyncio.TimeoutError as exc:  # before Python 3.11 not the builtin TimeoutError
            raise TimeoutError(f"no answer within {timeout:g} s") from exc

    async def _perform(self, step: Step, args: tuple) -> Any:
        async with self.session() as protocol:
            if step is Step.BEGIN:
                (call,) = args
                return await protocol.begin(
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
                return await protocol.complete(claim.key, version, stored, claim.token)
            if step is Step.FAIL:
                claim, reason, retry_allowed = args
                return await protocol.fail(claim.key, claim.version, reason, claim.token, retry_allowed=retry_allowed)
            claim, reason = args
            return await protocol.mark_unknown(claim.key, claim.version, reason, claim.token)

    def tool(
        self,
        *,
        biz_type: str,
        biz_id: Union[str, Callable[[dict], str]],
        tool: Optional[str] = None,
        attempt: Union[int, str, Callable[[dict], int]] = 1,
        payload: Optional[Callable[[dict], Any]] = None,
        lease: Optional[datetime.timedelta] = None,
        timeout: Optional[float] = None,
    ) -> Callable[[Callable[..., Any]], "AsyncGuardedTool"]:
        """As Guard.tool, for an async tool function; `timeout` is the body's answer deadline."""

        def wrap(fn: Callable[..., Any]) -> AsyncGuardedTool:
            spec = ToolSpec(biz_type, biz_id, tool or fn.__name__, attempt, payload, lease or self.lease)
            return AsyncGuardedTool(self, fn, spec, timeout)

        return wrap


class AsyncGuardedTool:
    """An async tool function under an AsyncGuard: awaiting it gives the response or raises an
    IdemError; `await .run(...)` gives the ToolResult instead."""

    def __init__(self, guard: AsyncGuard, fn: Callable[..., Any], spec: ToolSpec, timeout: Optional[float]):
        self.guard, self.fn, self.spec, self.timeout = guard, fn, spec, timeout
        self.tool_name = spec.tool
        self._signature = inspect.signature(fn)
        functools.update_wrapper(self, fn)

    def call_for(self, args: tuple, kwargs: dict, context: Optional[CallContext] = None) -> ToolCall:
        return self.spec.call_for(self._signature, args, kwargs, context)

    async def run(self, *args: Any, context: Optional[CallContext] = None, **kwargs: Any) -> ToolResult:
        call = self.call_for(args, kwargs, context)
        return await self.guard.run(call, lambda: self.fn(*args, **kwargs), timeout=self.timeout)

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return (await self.run(*args, **kwargs)).unwrap()
