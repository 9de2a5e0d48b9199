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

import dataclasses
import datetime
from typing import Any, Optional

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb

from .vocabulary import Outcome, RecordStatus, ResultCode, TriggerSource

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
RECORD_FUND_FLOW_SQL = (
    "SELECT flow_id, is_duplicate FROM idem.record_fund_flow("
    "%s::text, %s::text, %s::text, %s::bigint, %s::text, %s::text, %s::text)"
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


class Protocol:
    """The protocol over one psycopg connection. Not for use by two threads at once."""

    def __init__(self, connection: psycopg.Connection):
        self.connection = connection

    def _one(self, sql: str, params: tuple) -> tuple:
        conn = self.connection
        if conn.info.transaction_status != TransactionStatus.IDLE:
            raise ProtocolMisuse(
                "the idem protocol needs each call to commit on its own, but the connection is inside "
                "an open transaction: use an autocommit connection"
            )
        if conn.autocommit:
            return conn.execute(sql, params).fetchone()
        with conn.transaction():
            return conn.execute(sql, params).fetchone()

    def begin(
        self,
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
    ) -> BeginResult:
        """Claims the key. `request_hash` None: the database hashes the payload's jsonb text."""
        source = TriggerSource(trigger_source)
        row = self._one(
            BEGIN_SQL,
            (key, biz_type, biz_id, tool, request_hash, source.value, Jsonb(payload), lease, agent_id, trace_id),
        )
        return BeginResult(Outcome(row[0]), _status(row[1]), row[2], row[3], row[4])

    def complete(self, key: str, expected_version: int, response: Any, claim_token: Optional[str]) -> ChangeResult:
        return self._change(COMPLETE_SQL, (key, expected_version, Jsonb(response), claim_token))

    def fail(
        self,
        key: str,
        expected_version: int,
        error: str,
        claim_token: Optional[str],
        retry_allowed: bool = False,
    ) -> ChangeResult:
        """retry_allowed False: a definite business failure, final. True: it never reached downstream."""
        return self._change(FAIL_SQL, (key, expected_version, error, claim_token, retry_allowed))

    def mark_unknown(self, key: str, expected_version: int, reason: str, claim_token: Optional[str]) -> ChangeResult:
        return self._change(MARK_UNKNOWN_SQL, (key, expected_version, reason, claim_token))

    def record_fund_flow(
        self,
        biz_type: str,
        biz_id: str,
        kind: str,
        amount_minor: int,
        currency: str,
        external_ref: str,
        idempotency_key: Optional[str] = None,
    ) -> tuple[int, bool]:
        """The ledger as the gateway reports it: (flow id, is a duplicate)."""
        row = self._one(
            RECORD_FUND_FLOW_SQL, (biz_type, biz_id, kind, amount_minor, currency, external_ref, idempotency_key)
        )
        return int(row[0]), bool(row[1])

    def _change(self, sql: str, params: tuple) -> ChangeResult:
        return _change(self._one(sql, params))


class AsyncProtocol:
    """The protocol over one psycopg AsyncConnection: the same statements and answers as Protocol."""

    def __init__(self, connection: psycopg.AsyncConnection):
        self.connection = connection

    async def _one(self, sql: str, params: tuple) -> tuple:
        conn = self.connection
        if conn.info.transaction_status != TransactionStatus.IDLE:
            raise ProtocolMisuse(
                "the idem protocol needs each call to commit on its own, but the connection is inside "
                "an open transaction: use an autocommit connection"
            )
        if conn.autocommit:
            return await (await conn.execute(sql, params)).fetchone()
        async with conn.transaction():
            return await (await conn.execute(sql, params)).fetchone()

    async def begin(
        self,
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
    ) -> BeginResult:
        source = TriggerSource(trigger_source)
        row = await self._one(
            BEGIN_SQL,
            (key, biz_type, biz_id, tool, request_hash, source.value, Jsonb(payload), lease, agent_id, trace_id),
        )
        return BeginResult(Outcome(row[0]), _status(row[1]), row[2], row[3], row[4])

    async def complete(self, key: str, expected_version: int, response: Any, claim_token: Optional[str]) -> ChangeResult:
        return _change(await self._one(COMPLETE_SQL, (key, expected_version, Jsonb(response), claim_token)))

    async def fail(
        self, key: str, expected_version: int, error: str, claim_token: Optional[str], retry_allowed: bool = False
    ) -> ChangeResult:
        return _change(await self._one(FAIL_SQL, (key, expected_version, error, claim_token, retry_allowed)))

    async def mark_unknown(self, key: str, expected_version: int, reason: str, claim_token: Optional[str]) -> ChangeResult:
        return _change(await self._one(MARK_UNKNOWN_SQL, (key, expected_version, reason, claim_token)))

    async def record_fund_flow(
        self,
        biz_type: str,
        biz_id: str,
        kind: str,
        amount_minor: int,
        currency: str,
        external_ref: str,
        idempotency_key: Optional[str] = None,
    ) -> tuple[int, bool]:
        row = await self._one(
            RECORD_FUND_FLOW_SQL, (biz_type, biz_id, kind, amount_minor, currency, external_ref, idempotency_key)
        )
        return int(row[0]), bool(row[1])


def _change(row: tuple) -> ChangeResult:
    return ChangeResult(ResultCode(row[0]), _status(row[1]), row[2])
