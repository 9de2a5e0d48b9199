"""Through PgBouncer in transaction mode, as platforms deploy it: psycopg prepares a statement it
has run five times as a named statement of the session, which a pooler shares between clients. The
client recognises the pooler and prepares nothing there, so every call runs once, as itself."""

from __future__ import annotations

import asyncio
import contextlib
import unittest
from typing import Iterator

import psycopg
from psycopg import sql

from idemwatch import Outcome, TriggerSource
from idemwatch.protocol import AsyncProtocol, Protocol

from .support import POOLED_DSN, WRITER_DSN, admin, in_threads, scalar, unique

CLAIMS_EACH = 12  # more than psycopg's prepare_threshold (5), for each statement


def claim_and_complete(protocol: Protocol, order: str) -> None:
    begun = protocol.begin(f"key-{order}", "payment", order, "pay", trigger_source=TriggerSource.INITIAL,
                           payload={"order_id": order, "amount_minor": 100})
    assert begun.outcome == Outcome.EXECUTED, begun
    done = protocol.complete(f"key-{order}", begun.version, {"ok": True}, begun.claim_token)
    assert done.ok, done


@contextlib.contextmanager
def complete_returns_a_wider_version() -> Iterator[None]:
    """idem.complete replaced, as a migration would, with one whose `version` is a bigint: every
    session's prepared `SELECT ... FROM idem.complete(...)` now has a stale plan. Its owner, grants
    and comment are kept; the original comes back on the way out."""
    signature = "idem.complete(text, integer, jsonb, uuid)"
    with admin() as conn:
        definition, owner, comment = conn.execute(
            "SELECT pg_get_functiondef(oid), pg_get_userbyid(proowner), obj_description(oid, 'pg_proc')"
            " FROM pg_proc WHERE oid = %s::regprocedure", (signature,)).fetchone()
        grants = conn.execute(
            "SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END"
            " FROM pg_proc AS p, aclexplode(p.proacl) AS a WHERE p.oid = %s::regprocedure"
            " AND a.privilege_type = 'EXECUTE'", (signature,)).fetchall()
        assert "OUT version integer" in definition, definition

        def install(text: str) -> None:
            with conn.transaction():
                conn.execute(f"DROP FUNCTION {signature}")
                conn.execute(text)
                conn.execute(f"ALTER FUNCTION {signature} OWNER TO {owner}")
                conn.execute(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC")
                for (grantee,) in grants:
                    conn.execute(f"GRANT EXECUTE ON FUNCTION {signature} TO {grantee}")
                conn.execute(sql.SQL("COMMENT ON FUNCTION {} IS {}").format(sql.SQL(signature), sql.Literal(comment)))

        install(definition.replace("OUT version integer", "OUT version bigint"))
        try:
            yield
        finally:
            install(definition)


class PoolerTest(unittest.TestCase):
    def test_behind_a_pooler_nothing_is_prepared_and_every_call_runs_once(self):
        # Four clients, two server connections: each client's calls land on either.
        prefix = unique("pooled")
        failures: list = []

        def client(i: int) -> None:
            try:
                with psycopg.connect(POOLED_DSN, autocommit=True) as conn:
                    for n in range(CLAIMS_EACH):
                        claim_and_complete(Protocol(conn), f"{prefix}-{i}-{n}")
                    if conn.prepare_threshold is not None:
                        failures.append(f"client {i} would still prepare ({conn.prepare_threshold})")
            except Exception as e:  # noqa: BLE001 - the test reports every client's failure
                failures.append(f"client {i}: {e!r}")

        in_threads(client, 4)
        self.assertEqual(failures, [])
        like = f"{prefix}-%"
        self.assertEqual(scalar("SELECT count(*) FROM idem.records WHERE biz_id LIKE %s AND status = 'SUCCESS'", like),
                         4 * CLAIMS_EACH)
        self.assertEqual(scalar("SELECT count(*) FROM idem.attempts WHERE biz_id LIKE %s", like), 4 * CLAIMS_EACH)

    def test_the_async_client_behind_a_pooler_prepares_nothing(self):
        prefix = unique("pooled-async")

        async def run() -> int | None:
            async with await psycopg.AsyncConnection.connect(POOLED_DSN, autocommit=True) as conn:
                protocol = AsyncProtocol(conn)
                for n in range(CLAIMS_EACH):
                    key = f"key-{prefix}-{n}"
                    begun = await protocol.begin(key, "payment", f"{prefix}-{n}", "pay",
                                                 trigger_source=TriggerSource.INITIAL, payload={"n": n})
                    assert begun.outcome == Outcome.EXECUTED, begun
                    assert (await protocol.complete(key, begun.version, {"ok": True}, begun.claim_token)).ok
                return conn.prepare_threshold

        self.assertIsNone(asyncio.run(run()))
        self.assertEqual(scalar("SELECT count(*) FROM idem.records WHERE biz_id LIKE %s AND status = 'SUCCESS'",
                                f"{prefix}-%"), CLAIMS_EACH)

    def test_a_session_of_its_own_keeps_preparing(self):
        # Directly connected, psycopg's prepared statements are kept: they save the server's
        # parsing and planning of every call.
        order = unique("direct")
        with psycopg.connect(WRITER_DSN, autocommit=True) as conn:
            threshold = conn.prepare_threshold
            for n in range(CLAIMS_EACH):
                claim_and_complete(Protocol(conn), f"{order}-{n}")
            self.assertEqual(conn.prepare_threshold, threshold)
            prepared = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0]
        self.assertGreaterEqual(prepared, 2)

    def test_a_session_that_lost_its_statements_runs_the_call_once_unprepared(self):
        order = unique("lost")
        with psycopg.connect(WRITER_DSN, autocommit=True) as conn:
            for n in range(CLAIMS_EACH):
                claim_and_complete(Protocol(conn), f"{order}-{n}")
            conn.execute("DEALLOCATE ALL")  # what a pooler's DISCARD ALL leaves behind
            claim_and_complete(Protocol(conn), f"{order}-after")
            self.assertIsNone(conn.prepare_threshold)
        self.assertEqual(scalar("SELECT count(*) FROM idem.attempts WHERE biz_id = %s", f"{order}-after"), 1)

    def test_a_migration_that_changes_a_result_type_fails_no_prepared_call(self):
        # A platform team migrates while agents run: the next call of each prepared statement meets
        # a stale plan ("cached plan must not change result type"), which ran nothing; it runs
        # again, with psycopg's statements discarded, and answers.
        # Each call commits by itself (autocommit) or in a transaction the client opens.
        order = unique("reshaped")
        with psycopg.connect(WRITER_DSN, autocommit=True) as alone, psycopg.connect(WRITER_DSN) as wrapped:
            for conn in (alone, wrapped):
                for n in range(CLAIMS_EACH):
                    claim_and_complete(Protocol(conn), f"{order}-{conn.autocommit}-{n}")
            with complete_returns_a_wider_version():
                for conn in (alone, wrapped):
                    claim_and_complete(Protocol(conn), f"{order}-{conn.autocommit}-after")
                    claim_and_complete(Protocol(conn), f"{order}-{conn.autocommit}-again")
            for conn in (alone, wrapped):
                self.assertIsNotNone(conn.prepare_threshold)
        self.assertEqual(scalar("SELECT count(*) FROM idem.records WHERE biz_id LIKE %s AND status = 'SUCCESS'",
                                f"{order}-%"), 2 * (CLAIMS_EACH + 2))

    def test_the_async_client_outlives_a_changed_result_type(self):
        order = unique("reshaped-async")

        async def claims(conn: psycopg.AsyncConnection, names: list) -> None:
            protocol = AsyncProtocol(conn)
            for name in names:
                key = f"key-{name}"
                begun = await protocol.begin(key, "payment", name, "pay", trigger_source=TriggerSource.INITIAL,
                                             payload={"order_id": name})
                assert begun.outcome == Outcome.EXECUTED, begun
                assert (await protocol.complete(key, begun.version, {"ok": True}, begun.claim_token)).ok

        async def run() -> None:
            async with await psycopg.AsyncConnection.connect(WRITER_DSN, autocommit=True) as conn:
                await claims(conn, [f"{order}-{n}" for n in range(CLAIMS_EACH)])
                with complete_returns_a_wider_version():
                    await claims(conn, [f"{order}-after"])

        asyncio.run(run())
        self.assertEqual(scalar("SELECT count(*) FROM idem.records WHERE biz_id LIKE %s AND status = 'SUCCESS'",
                                f"{order}-%"), CLAIMS_EACH + 1)


if __name__ == "__main__":
    unittest.main()
