"""Answers lost on the wire, as in a failover or a reset: a TCP layer between the guard and
PostgreSQL drops the server's answer to one call, after the server committed it, and then refuses
new connections for a moment, as a cluster does while a replica takes over. The guard sends the
same call again (the same key, token and version) and the record ends where one send would have
left it; the tool body never runs twice."""

from __future__ import annotations

import os
import socket
import threading
import time
import unittest

import idemwatch
from idemwatch import Guard, Outcome, RecordStatus

from .support import Gateway, counted, payment, scalar, status_of, unique

SERVER_PORT = int(os.environ.get("IDEMWATCH_CLIENT_PORT", "0"))
DATABASE = os.environ.get("IDEMWATCH_CLIENT_DATABASE", "")
WRITER = os.environ.get("IDEMWATCH_CLIENT_USER", "")


class AnswerDropper:
    """Forwards TCP to the test server on 127.0.0.1. Armed with a marker, it cuts the connection
    whose answer carries it, that answer unsent, and refuses connections for `refuse_for` seconds."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.marker: bytes | None = None
        self.refuse_for = 0.0
        self.refusing_until = 0.0
        self.dropped = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, marker: bytes, refuse_for: float) -> None:
        with self.lock:
            self.marker, self.refuse_for = marker, refuse_for

    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} dbname={DATABASE} user={WRITER} connect_timeout=2"

    def _accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            if time.monotonic() < self.refusing_until:
                client.close()
                continue
            server = socket.create_connection(("127.0.0.1", SERVER_PORT))
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, answers: bool) -> None:
        try:
            while chunk := source.recv(65536):
                if answers:
                    with self.lock:
                        hit = self.marker is not None and self.marker in chunk
                        if hit:
                            self.marker = None
                            self.dropped += 1
                            self.refusing_until = time.monotonic() + self.refuse_for
                    if hit:
                        break
                target.sendall(chunk)
        except OSError:
            pass
        for s in (source, target):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


@unittest.skipUnless(SERVER_PORT, "needs the test server's TCP port (clients/run_tests.sh)")
class LostAnswerTest(unittest.TestCase):
    def setUp(self):
        self.wire = AnswerDropper()
        self.guard = Guard(self.wire.dsn())
        self.gateway = Gateway()

    def tearDown(self):
        self.guard.close()

    def transitions(self, key: str) -> list[tuple]:
        from .support import rows

        return rows("SELECT from_status, to_status FROM idem.transitions WHERE idempotency_key = %s ORDER BY id", key)

    def test_a_lost_answer_to_complete_is_sent_again_and_counts_as_recorded(self):
        order = unique("lost-complete")
        body = counted(lambda: self.gateway.charge(order, 2990))
        self.wire.arm(b"SUCCESS", refuse_for=1.0)  # the answer to complete names the new status
        result = self.guard.run(payment(order), body)
        self.assertEqual(self.wire.dropped, 1)
        self.assertIsNone(result.error, result.error)
        self.assertEqual(result.outcome, Outcome.EXECUTED)
        self.assertEqual(body.runs, 1)
        self.assertEqual(self.gateway.count(order), 1)
        key = payment(order).key
        self.assertEqual(status_of(key), "SUCCESS")
        self.assertEqual(self.transitions(key), [(None, "PROCESSING"), ("PROCESSING", "SUCCESS")])
        # A retry of the call replays the stored answer; nothing runs again.
        again = self.guard.run(payment(order), body)
        self.assertEqual(again.outcome, Outcome.REPLAYED)
        self.assertEqual(body.runs, 1)

    def test_a_lost_answer_to_fail_is_sent_again_and_the_call_may_be_retried(self):
        order = unique("lost-fail")

        def refused():
            raise idemwatch.NotSent("the gateway refused the connection")

        self.wire.arm(b"FAILED", refuse_for=0.5)
        result = self.guard.run(payment(order), refused)
        self.assertEqual(self.wire.dropped, 1)
        self.assertIsInstance(result.error, idemwatch.RetryableFailure)
        self.assertEqual(status_of(payment(order).key), "FAILED")
        # The retry the answer allows runs the call, once.
        body = counted(lambda: self.gateway.charge(order, 2990))
        self.assertIsNone(self.guard.run(payment(order), body).error)
        self.assertEqual(body.runs, 1)

    def test_a_lost_answer_to_a_claim_is_sent_again_and_the_body_never_runs_unclaimed(self):
        # The claim committed, its answer (executed, with the token) was lost: the second send
        # finds the record in progress, so the body does not run, and the record waits for its
        # lease to end like any claim whose claimant went away.
        order = unique("lost-claim")
        body = counted(lambda: self.gateway.charge(order, 2990))
        self.wire.arm(b"executed", refuse_for=0.5)
        result = self.guard.run(payment(order), body)
        self.assertEqual(self.wire.dropped, 1)
        self.assertIsInstance(result.error, idemwatch.InProgress)
        self.assertEqual(body.runs, 0)
        self.assertEqual(status_of(payment(order).key), RecordStatus.PROCESSING.value)
        self.assertEqual(
            scalar("SELECT count(*) FROM idem.attempts WHERE idempotency_key = %s", payment(order).key), 2
        )


if __name__ == "__main__":
    unittest.main()
