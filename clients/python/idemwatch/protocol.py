"""The protocol functions of the idem schema as typed calls, one committed statement each
(`Protocol` on a psycopg Connection, `AsyncProtocol` on an AsyncConnection).

This is the thin layer: it says exactly what the database said. `idemwatch.guard` builds the
correct use of a tool call on top of it; reach for this module directly only for what the guard
does not do (a reconciler, a test).

Every call must commit on its own: `begin` must be durable before the caller goes downstream, and
`complete` must not wait for the caller's other work. A connection inside an open transaction is
refused rather than silently turning the claim into a savepoint that a rollback would undo.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import inspect
import random
import sys
import time
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Generic, Optional, TypeVar

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb

from .vocabulary import Outcome, RecordStatus, ResultCode, TriggerSource

if TYPE_CHECKING:
    if sys.version_info >= (3, 10):
        from typing import Concatenate, ParamSpec
    else:
        from typing_extensions import Concatenate, ParamSpec
    _P = ParamSpec("_P")
_R = TypeVar("_R")
_F = TypeVar("_F", bound=Callable[..., Any])

# The statements, with every parameter typed so that a NULL never leaves the overload ambiguous.
BEGIN_SQL = (
    "SELECT outcome, status, version, response_payload, claim_token::text FROM idem.begin("
    "%s::text, %s::text, %s::text, %s::text, %s::text, %s::text, %s::jsonb, %s::interval,"
    " %s::text, %s::text)"
)
COMPLETE_SQL = "SELECT result, status, version FROM idem.complete(%s::text, %s::integer, %s::jsonb, %s::uuid)"
FAIL_SQL = (
    "SELECT result, status, version FROM idem.fail(%s::text, %s::integer, %s::text, %s::uuid, %s::boolean)"
)
MARK_UNKNOWN_SQL = (
    "SELECT result, status, version FROM idem.mark_unknown(%s::text, %s::integer, %s::text, %s::uuid)"
)
# The gateway's word (a login granted idem_ledger) and the claimant's (idem_writer, with its token).
RECORD_FUND_FLOW_SQL = (
    "SELECT flow_id, is_duplicate FROM idem.record_fund_flow("
    "%s::text, %s::text, %s::text, %s::bigint, %s::text, %s::text, %s::text)"
)
RECORD_CLAIMANT_FLOW_SQL = (
    "SELECT flow_id, is_duplicate FROM idem.record_fund_flow("
    "%s::text, %s::text, %s::text, %s::bigint, %s::text, %s::text, %s::text, %s::uuid)"
)

DEFAULT_LEASE = datetime.timedelta(seconds=30)


class ProtocolMisuse(RuntimeError):
    """The protocol was called in a way that would break its guarantees (an open transaction)."""


@dataclasses.dataclass(frozen=True)
class BeginResult:
    outcome: Outcome
    status: Optional[RecordStatus]  # the key's record; None when rejected or retired
    version: Optional[int]
    response_payload: Any  # the stored response (replayed SUCCESS) or error (replayed FAILED), as JSON
    claim_token: Optional[str]  # only for `executed`: the proof that this caller is the claimant


@dataclasses.dataclass(frozen=True)
class Claim:
    """What the claimant holds after `executed`: everything complete / fail / mark_unknown need."""

    key: str
    version: int
    token: Optional[str]  # None only if the server gave none: every report is then not_claimant


@dataclasses.dataclass(frozen=True)
class ChangeResult:
    result: ResultCode
    status: Optional[RecordStatus]  # after the call, or the current one when refused
    version: Optional[int]

    @property
    def ok(self) -> bool:
        return self.result is ResultCode.OK


def _status(text: Optional[str]) -> Optional[RecordStatus]:
    return None if text is None else RecordStatus(text)


def _begin_result(row: tuple) -> BeginResult:
    return BeginResult(Outcome(row[0]), _status(row[1]), row[2], row[3], row[4])


def _change_result(row: tuple) -> ChangeResult:
    return ChangeResult(ResultCode(row[0]), _status(row[1]), row[2])


def _flow_result(row: tuple) -> tuple[int, bool]:
    return int(row[0]), bool(row[1])


@dataclasses.dataclass
class _Statement(Generic[_R]):
    """One protocol call as the database takes it: the statement, its parameters, how its row reads."""

    sql: str
    params: tuple
    read: Callable[[tuple], _R]


class _Calls:
    """Each protocol function once: its parameters, statement and answer. `Protocol` runs them
    blocking and `AsyncProtocol` awaited (`_blocking`, `_awaited`); the signatures and docstrings
    here are the methods'."""

    @staticmethod
    def begin(
        key: str,
        biz_type: str,
        biz_id: str,
        tool: str,
        *,
        trigger_source: TriggerSource,
        payload: Any,
        request_hash: Optional[str] = None,
        lease: datetime.timedelta = DEFAULT_LEASE,
        agent_id: Optional[str] = None,
        trace_id: Optional[str] = None,
    ) -> _Statement[BeginResult]:
        """Claims the key. `request_hash` None: the database hashes the payload's jsonb text."""
        source = TriggerSource(trigger_source)
        params = (key, biz_type, biz_id, tool, request_hash, source.value, Jsonb(payload), lease, agent_id, trace_id)
        return _Statement(BEGIN_SQL, params, _begin_result)

    @staticmethod
    def complete(key: str, expected_version: int, response: Any, claim_token: Optional[str]) -> _Statement[ChangeResult]:
        return _Statement(COMPLETE_SQL, (key, expected_version, Jsonb(response), claim_token), _change_result)

    @staticmethod
    def fail(
        key: str, expected_version: int, error: str, claim_token: Optional[str], retry_allowed: bool = False
    ) -> _Statement[ChangeResult]:
        """retry_allowed False: a definite business failure, final. True: it never reached downstream."""
        return _Statement(FAIL_SQL, (key, expected_version, error, claim_token, retry_allowed), _change_result)

    @staticmethod
    def mark_unknown(key: str, expected_version: int, reason: str, claim_token: Optional[str]) -> _Statement[ChangeResult]:
        return _Statement(MARK_UNKNOWN_SQL, (key, expected_version, reason, claim_token), _change_result)

    @staticmethod
    def record_fund_flow(
        biz_type: str,
        biz_id: str,
        kind: str,
        amount_minor: int,
        currency: str,
        external_ref: str,
        idempotency_key: Optional[str] = None,
        claim_token: Optional[str] = None,
    ) -> _Statement[tuple[int, bool]]:
        """One line of the ledger: (flow id, is a duplicate). Without `claim_token`, the gateway's
        word (a callback, a statement line), on a login granted idem_ledger. With it, the claimant
        reporting its own side effect under `idempotency_key`, on an idem_writer login; a wrong
        token is refused (psycopg.errors.InsufficientPrivilege) and nothing is written."""
        params = (biz_type, biz_id, kind, amount_minor, currency, external_ref, idempotency_key)
        if claim_token is None:
            return _Statement(RECORD_FUND_FLOW_SQL, params, _flow_result)
        return _Statement(RECORD_CLAIMANT_FLOW_SQL, params + (claim_token,), _flow_result)


class _Autocommitted:
    """The transaction an autocommit connection does not need: each statement commits by itself
    (contextlib.nullcontext, which is async only from Python 3.10)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: Any) -> None:
        return None


_AUTOCOMMITTED = _Autocommitted()


def _own_transaction(conn: Any) -> Any:
    """What a statement commits in: itself on an autocommit connection, else a transaction of its
    own. A connection already inside a transaction is refused."""
    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise ProtocolMisuse(
            "the idem protocol needs each call to commit on its own, but the connection is inside "
            "an open transaction: use an autocommit connection"
        )
    return _AUTOCOMMITTED if conn.autocommit else conn.transaction()


def _method(call: _F, build: Callable[..., Any], owner: str) -> _F:
    """`call` named, documented and signed (self first) as the protocol function `build` states."""
    functools.update_wrapper(call, build)
    call.__qualname__ = f"{owner}.{build.__name__}"
    parameters = inspect.signature(build).parameters.values()
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    call.__signature__ = inspect.Signature([self_parameter, *parameters])  # type: ignore[attr-defined]
    return call


def _blocking(build: Callable[_P, _Statement[_R]]) -> Callable[Concatenate[Protocol, _P], _R]:
    def call(self: Protocol, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        statement = build(*args, **kwargs)
        return statement.read(self._row(statement))

    return _method(call, build, "Protocol")


def _awaited(build: Callable[_P, _Statement[_R]]) -> Callable[Concatenate[AsyncProtocol, _P], Coroutine[Any, Any, _R]]:
    async def call(self: AsyncProtocol, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        statement = build(*args, **kwargs)
        return statement.read(await self._row(statement))

    return _method(call, build, "AsyncProtocol")


# A call that ends in a serialization failure (40001) or a deadlock (40P01) changed nothing: it runs
# again in a new transaction, whose snapshot gives the contract's answer, as REPEATABLE READ and
# SERIALIZABLE (a role's or a database's default) ask of every client.
SERIALIZATION_RETRIES = 8
_TRANSIENT = (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected)


def _pause(attempt: int) -> float:
    """Seconds to wait before the next try: 0.5 to 1 ms after the first failure, doubling each time
    (32 to 64 ms before the last), spread at random so the racers that failed together part."""
    ceiling = 0.001 * 2 ** min(attempt - 1, 7)
    return random.uniform(ceiling / 2, ceiling)


class Protocol:
    """The protocol over one psycopg connection. Not for use by two threads at once."""

    def __init__(self, connection: psycopg.Connection):
        self.connection = connection

    def _row(self, statement: _Statement[Any]) -> tuple:
        conn = self.connection
        for attempt in range(1, SERIALIZATION_RETRIES + 1):
            try:
                with _own_transaction(conn):
                    return conn.execute(statement.sql, statement.params).fetchone()
            except _TRANSIENT:
                if attempt == SERIALIZATION_RETRIES:
                    raise
                time.sleep(_pause(attempt))
        raise AssertionError("unreachable")

    begin = _blocking(_Calls.begin)
    complete = _blocking(_Calls.complete)
    fail = _blocking(_Calls.fail)
    mark_unknown = _blocking(_Calls.mark_unknown)
    record_fund_flow = _blocking(_Calls.record_fund_flow)


class AsyncProtocol:
    """The protocol over one psycopg AsyncConnection: the same statements and answers as Protocol."""

    def __init__(self, connection: psycopg.AsyncConnection):
        self.connection = connection

    async def _row(self, statement: _Statement[Any]) -> tuple:
        conn = self.connection
        for attempt in range(1, SERIALIZATION_RETRIES + 1):
            try:
                async with _own_transaction(conn):
                    return await (await conn.execute(statement.sql, statement.params)).fetchone()
            except _TRANSIENT:
                if attempt == SERIALIZATION_RETRIES:
                    raise
                await asyncio.sleep(_pause(attempt))
        raise AssertionError("unreachable")

    begin = _awaited(_Calls.begin)
    complete = _awaited(_Calls.complete)
    fail = _awaited(_Calls.fail)
    mark_unknown = _awaited(_Calls.mark_unknown)
    record_fund_flow = _awaited(_Calls.record_fund_flow)
