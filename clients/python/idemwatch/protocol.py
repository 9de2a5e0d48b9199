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
import re
import sys
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Generic, Optional, TypeVar

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb

from .vocabulary import FundFlowKind, Outcome, RecordStatus, ResultCode, StatementLineResult, TriggerSource

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
# The gateway's callback (a webhook event), on a login granted idem_ledger.
INGEST_CALLBACK_SQL = (
    "SELECT result, record_key, flow_id, record_status, already_received FROM idem.ingest_callback("
    "%s::text, %s::text, %s::text, %s::bigint, %s::text, %s::text, %s::text, %s::text, %s::jsonb)"
)

DEFAULT_LEASE = datetime.timedelta(seconds=30)
# The schema's bounds of a flow's amount and of a gateway's name (idem.check_fund_flow, idem.gateways).
MAX_AMOUNT_MINOR = 999_999_999_999_999
_GATEWAY = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_CURRENCY = re.compile(r"[A-Z]{3}")


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


@dataclasses.dataclass(frozen=True)
class CallbackResult:
    """What idem.ingest_callback found for a gateway's event, the same on every re-delivery."""

    result: StatementLineResult  # matched, mismatched (a person decides), unmatched or duplicate
    record_key: Optional[str]  # the record the event names, when one does
    flow_id: Optional[int]  # the ledger's flow of the side effect, when matched
    record_status: Optional[RecordStatus]  # the record's status now (SUCCESS once a match resolved it)
    already_received: bool  # a re-delivery: nothing was done again

    @property
    def matched(self) -> bool:
        return self.result is StatementLineResult.MATCHED


def _status(text: Optional[str]) -> Optional[RecordStatus]:
    return None if text is None else RecordStatus(text)


def _begin_result(row: tuple) -> BeginResult:
    return BeginResult(Outcome(row[0]), _status(row[1]), row[2], row[3], row[4])


def _change_result(row: tuple) -> ChangeResult:
    return ChangeResult(ResultCode(row[0]), _status(row[1]), row[2])


def _flow_result(row: tuple) -> tuple[int, bool]:
    return int(row[0]), bool(row[1])


def _callback_result(row: tuple) -> CallbackResult:
    flow_id = None if row[2] is None else int(row[2])
    return CallbackResult(StatementLineResult(row[0]), row[1], flow_id, _status(row[3]), bool(row[4]))


def _text(name: str, value: Any, limit: int = 255, required: bool = True) -> Optional[str]:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        shown = f"{len(value)} characters" if isinstance(value, str) and len(value) > limit else repr(value)
        need = f"a non-blank string of at most {limit} characters" + ("" if required else ", or None")
        raise ValueError(f"ingest_callback: {name} must be {need}, got {shown}")
    return value


def _callback_params(
    gateway: Any,
    event_id: Any,
    kind: Any,
    amount_minor: Any,
    currency: Any,
    gateway_ref: Any,
    idempotency_key: Any,
    biz_id: Any,
    payload: Any,
) -> tuple:
    """The arguments of idem.ingest_callback, checked before anything reaches the database."""
    if not isinstance(gateway, str) or not _GATEWAY.fullmatch(gateway):
        raise ValueError(f"ingest_callback: gateway must be 1 to 64 characters of A-Z a-z 0-9 _ . -, got {gateway!r}")
    _text("event_id (the gateway's id of the event: a re-delivery is known by it)", event_id)
    try:
        flow_kind = FundFlowKind(kind)
    except ValueError:
        kinds = ", ".join(k.value for k in FundFlowKind)
        raise ValueError(f"ingest_callback: kind must be a fund flow kind ({kinds}), got {kind!r}") from None
    if isinstance(amount_minor, bool) or not isinstance(amount_minor, int) or not 0 <= amount_minor <= MAX_AMOUNT_MINOR:
        raise ValueError(
            f"ingest_callback: amount_minor must be an integer number of minor units from 0 to {MAX_AMOUNT_MINOR}"
            f" (the gateway's gross amount, never negative: the kind is the direction), got {amount_minor!r}"
        )
    if not isinstance(currency, str) or not _CURRENCY.fullmatch(currency):
        raise ValueError(f"ingest_callback: currency must be three capital letters (ISO 4217, e.g. EUR), got {currency!r}")
    _text("gateway_ref (the gateway's reference of the side effect: the charge id, not the event id)", gateway_ref)
    _text("idempotency_key", idempotency_key, required=False)
    _text("biz_id", biz_id, required=False)
    return (
        gateway,
        event_id,
        flow_kind.value,
        amount_minor,
        currency,
        gateway_ref,
        idempotency_key,
        biz_id,
        None if payload is None else Jsonb(payload),
    )


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

    @staticmethod
    def ingest_callback(
        *,
        gateway: str,
        event_id: str,
        kind: FundFlowKind,
        amount_minor: int,
        currency: str,
        gateway_ref: str,
        idempotency_key: Optional[str] = None,
        biz_id: Optional[str] = None,
        payload: Any = None,
    ) -> _Statement[CallbackResult]:
        """The gateway's callback (a webhook event), on a login granted idem_ledger: matched to its
        record by `idempotency_key` (the key the client gave the gateway), else by `gateway_ref`,
        else by `biz_id`. Matched, its flow enters the ledger under `gateway_ref` (the charge's or
        refund's id, never the event's: the statement line of the same side effect is then the same
        flow) and an UNKNOWN record is resolved SUCCESS. Once per `event_id`: a re-delivery changes
        nothing and returns what the first delivery found (`already_received`). Arguments are
        checked first (ValueError, nothing sent); `payload` is the event as received (JSON)."""
        params = _callback_params(
            gateway, event_id, kind, amount_minor, currency, gateway_ref, idempotency_key, biz_id, payload
        )
        return _Statement(INGEST_CALLBACK_SQL, params, _callback_result)


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


# The connections whose session was asked whether a pooler stands in between: once a connection.
_SESSION_ASKED: "weakref.WeakSet[Any]" = weakref.WeakSet()
_SERVER_PID_SQL = "SELECT pg_catalog.pg_backend_pid()"


def _prepares(conn: Any) -> bool:
    """Whether `conn`'s session is still to be asked. psycopg prepares a statement it has run
    prepare_threshold times (5) as a named statement of the session (_pg3_0, _pg3_1, ...). Behind
    a pooler in transaction mode the session is shared: the next call may land on a server
    connection that lacks the statement, or holds another client's under the same name."""
    return conn.prepare_threshold is not None and conn not in _SESSION_ASKED


def _unprepared_if_shared(conn: Any, server_pid: int) -> None:
    """A pooler answers the startup itself: the backend pid it reported is not the server's.
    Then nothing is prepared on this connection (prepare_threshold None)."""
    _SESSION_ASKED.add(conn)
    if server_pid != conn.info.backend_pid:
        conn.prepare_threshold = None


# What the server answers about a prepared statement that is not there as psycopg left it (the
# session lost it, or another client's holds the name): nothing ran; the call runs again unprepared.
_LOST_PREPARED = (psycopg.errors.InvalidSqlStatementName, psycopg.errors.DuplicatePreparedStatement)


def _stale_plan(error: psycopg.errors.FeatureNotSupported) -> bool:
    """A prepared statement whose result type a migration changed ("cached plan must not change
    result type", whatever the server's language): refused before anything ran. It stays refused
    for as long as the session keeps it, so psycopg's statements are discarded and the call runs
    again (unprepared; psycopg prepares it anew once it has run prepare_threshold times more)."""
    return error.diag.source_function == "RevalidateCachedQuery"


class _Discarded(Exception):
    """Raised inside an empty transaction block to roll it back."""


def _discard_prepared(conn: psycopg.Connection) -> None:
    """psycopg discards its prepared statements (DEALLOCATE ALL) when a transaction block rolls
    back; the block around an autocommit connection's call is this one, empty."""
    try:
        with conn.transaction():
            raise _Discarded
    except _Discarded:
        pass


async def _discard_prepared_async(conn: psycopg.AsyncConnection) -> None:
    try:
        async with conn.transaction():
            raise _Discarded
    except _Discarded:
        pass


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
        # A lost statement and a stale plan are each met once at most (nothing is prepared, or
        # psycopg's statements are gone, after them); serialization failures have their own count.
        unprepared = replanned = False
        failures = 0
        while True:
            try:
                with _own_transaction(conn):
                    if _prepares(conn):
                        _unprepared_if_shared(conn, conn.execute(_SERVER_PID_SQL).fetchone()[0])
                    return conn.execute(statement.sql, statement.params).fetchone()
            except _LOST_PREPARED:
                if unprepared:
                    raise
                unprepared = True
                conn.prepare_threshold = None
            except psycopg.errors.FeatureNotSupported as e:
                if not _stale_plan(e) or replanned:
                    raise
                replanned = True
                if conn.autocommit:  # (a transaction of the call's own rolled back and discarded them)
                    _discard_prepared(conn)
            except _TRANSIENT:
                failures += 1
                if failures == SERIALIZATION_RETRIES:
                    raise
                time.sleep(_pause(failures))

    begin = _blocking(_Calls.begin)
    complete = _blocking(_Calls.complete)
    fail = _blocking(_Calls.fail)
    mark_unknown = _blocking(_Calls.mark_unknown)
    record_fund_flow = _blocking(_Calls.record_fund_flow)
    ingest_callback = _blocking(_Calls.ingest_callback)


class AsyncProtocol:
    """The protocol over one psycopg AsyncConnection: the same statements and answers as Protocol."""

    def __init__(self, connection: psycopg.AsyncConnection):
        self.connection = connection

    async def _row(self, statement: _Statement[Any]) -> tuple:
        conn = self.connection
        # A lost statement and a stale plan are each met once at most (nothing is prepared, or
        # psycopg's statements are gone, after them); serialization failures have their own count.
        unprepared = replanned = False
        failures = 0
        while True:
            try:
                async with _own_transaction(conn):
                    if _prepares(conn):
                        pid = await (await conn.execute(_SERVER_PID_SQL)).fetchone()
                        _unprepared_if_shared(conn, pid[0])
                    return await (await conn.execute(statement.sql, statement.params)).fetchone()
            except _LOST_PREPARED:
                if unprepared:
                    raise
                unprepared = True
                conn.prepare_threshold = None
            except psycopg.errors.FeatureNotSupported as e:
                if not _stale_plan(e) or replanned:
                    raise
                replanned = True
                if conn.autocommit:
                    await _discard_prepared_async(conn)
            except _TRANSIENT:
                failures += 1
                if failures == SERIALIZATION_RETRIES:
                    raise
                await asyncio.sleep(_pause(failures))

    begin = _awaited(_Calls.begin)
    complete = _awaited(_Calls.complete)
    fail = _awaited(_Calls.fail)
    mark_unknown = _awaited(_Calls.mark_unknown)
    record_fund_flow = _awaited(_Calls.record_fund_flow)
    ingest_callback = _awaited(_Calls.ingest_callback)


def ingest_callback(
    conn: psycopg.Connection,
    *,
    gateway: str,
    event_id: str,
    kind: FundFlowKind,
    amount_minor: int,
    currency: str,
    gateway_ref: str,
    idempotency_key: Optional[str] = None,
    biz_id: Optional[str] = None,
    payload: Any = None,
) -> CallbackResult:
    """A webhook handler's one call: `Protocol(conn).ingest_callback(...)` on a connection of a
    login granted idem_ledger (autocommit, or outside a transaction). `AsyncProtocol` has the same
    method for asyncio."""
    return Protocol(conn).ingest_callback(
        gateway=gateway,
        event_id=event_id,
        kind=kind,
        amount_minor=amount_minor,
        currency=currency,
        gateway_ref=gateway_ref,
        idempotency_key=idempotency_key,
        biz_id=biz_id,
        payload=payload,
    )
