"""Through PgBouncer in transaction mode, as platforms deploy it: psycopg prepares a statement it
has run five times as a named statement of the session, which a pooler shares between clients. The
client recognises the pooler and prepares nothing there, so every call runs once, as itself."""

from __future__ import annotations

import asyncio
import unittest

import psycopg

from idemwatch import Outcome, TriggerSource
from idemwatch.protocol import AsyncProtocol, Protocol

from .support import POOLED_DSN, WRITER_DSN, in_threads, scalar, unique

CLAIMS_EACH = 12  # more than psycopg's prepare_threshold (5), for each statement


def claim_and_complete(protocol: Protocol, order: str) -> None:
    begun = protocol.begin(f"key-{order}", "payment", order, "pay", trigger_source=TriggerSource.INITIAL,
                           payload={"order_id": order, "amount_minor": 100})
    assert begun.outcome == Outcome.EXECUTED, begun
    done = protocol.complete(f"key-{order}", begun.version, {"ok": True}, begun.claim_token)
    assert done.ok, done


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


if __name__ == "__main__":
    unittest.main()
