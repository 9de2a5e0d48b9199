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
import inspect
from typing import Any, AsyncIterator, Awaitable, Callable, Optional, Union

import psycopg

from .call import CallContext, ToolCall, ToolResult
from .flow import Classifier, Step, perform
from .guard import GuardBase, GuardedToolBase, ToolSpec
from .protocol import DEFAULT_LEASE, AsyncProtocol

AsyncConnector = Union[str, Callable[[], Awaitable[psycopg.AsyncConnection]], Any]


class AsyncGuard(GuardBase["AsyncGuardedTool"]):
    """Runs tool calls under the protocol from asyncio.

    `connect` is one of: a libpq DSN or an async function returning a new AsyncConnection (the guard
    keeps one, shared by its tasks: psycopg runs their statements one at a time), or a pool with
    psycopg_pool's AsyncConnectionPool `connection()` (each step borrows a connection; none is held
    while the tool body runs). `classify` as for Guard.
    """

    def __init__(self, connect: AsyncConnector, *, lease: datetime.timedelta = DEFAULT_LEASE, classify: Optional[Classifier] = None):
        super().__init__(connect, lease=lease, classify=classify)
        self._connection: Optional[psycopg.AsyncConnection] = None
        self._connecting = asyncio.Lock()

    @staticmethod
    def _open(dsn: str) -> Awaitable[psycopg.AsyncConnection]:
        return psycopg.AsyncConnection.connect(dsn, autocommit=True)

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
        driver = self._driver(call)
        for step, args in driver:
            with driver.answering() as answer:
                answer.value = await (self._body(body, timeout) if step is Step.BODY else self._perform(step, args))
        return driver.result

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
        if step is Step.PAUSE:
            await asyncio.sleep(args[0])
            return None
        async with self.session() as protocol:
            return await perform(protocol, step, args)

    def _wrap(self, fn: Callable[..., Any], spec: ToolSpec, timeout: Optional[float] = None) -> AsyncGuardedTool:
        return AsyncGuardedTool(self, fn, spec, timeout)


class AsyncGuardedTool(GuardedToolBase):
    """An async tool function under an AsyncGuard: awaiting it gives the response or raises an
    IdemError; `await .run(...)` gives the ToolResult instead. `timeout` is the body's answer
    deadline (`guard.tool(..., timeout=5.0)`)."""

    guard: AsyncGuard

    def __init__(self, guard: AsyncGuard, fn: Callable[..., Any], spec: ToolSpec, timeout: Optional[float]):
        self.timeout = timeout
        super().__init__(guard, fn, spec)

    async def run(self, *args: Any, context: Optional[CallContext] = None, **kwargs: Any) -> ToolResult:
        call = self.call_for(args, kwargs, context)
        return await self.guard.run(call, lambda: self.fn(*args, **kwargs), timeout=self.timeout)

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return (await self.run(*args, **kwargs)).unwrap()
