"""The guard against a real PostgreSQL: each test names the behaviour it pins down."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import threading
import time
import unittest
import uuid

import psycopg

import idemwatch
from idemwatch import (
    BusinessFailure,
    Guard,
    Outcome,
    Protocol,
    RecordStatus,
    ResultCode,
    ToolCall,
    TriggerSource,
    call_context,
    stable_key,
)

from .support import ADMIN_DSN, WRITER_DSN, Gateway, admin, counted, in_threads, payment, rows, scalar, status_of, unique


def raising(exc: BaseException):
    def body():
        raise exc

    return body


SHORT_LEASE = datetime.timedelta(milliseconds=500)


def short_lease(order_id: str) -> ToolCall:
    """A payment whose lease runs out while its body runs (long enough that the claim's own answer
    comes back within it, or the claim would be given back unused)."""
    return dataclasses.replace(payment(order_id), lease=SHORT_LEASE)


def outlive_the_lease() -> int:
    """In the body of a short_lease call: waits past the lease and runs the sweeper, as it runs while
    downstream is slow (PROCESSING past its lease -> UNKNOWN); how many records it expired."""
    time.sleep(SHORT_LEASE.total_seconds() + 0.05)
    return scalar("SELECT idem.expire_leases()")


@contextlib.contextmanager
def key_held(key: str):
    """Another transaction claims `key` and holds it uncommitted; leaving the block rolls it back.
    A claim of the same key meanwhile waits inside its insert, after its lease started: the answer
    comes back late, as when a commit waits for a synchronous standby that is not there. Yields a
    function that waits until a claim is blocked behind it."""
    with psycopg.connect(ADMIN_DSN) as holder:
        holder.execute("SELECT idem.begin(%s, 'payment', 'held', 'pay', NULL, 'initial', '{}')", (key,))
        pid = holder.info.backend_pid

        def blocked() -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if scalar("SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", pid):
                    return
                time.sleep(0.02)
            raise AssertionError(f"no claim of {key!r} waited behind the held key")

        try:
            yield blocked
        finally:
            holder.rollback()


class GuardTest(unittest.TestCase):
    def setUp(self):
        self.guard = Guard(WRITER_DSN)
        self.gateway = Gateway()

    def tearDown(self):
        self.guard.close()

    def charge(self, order_id: str):
        return lambda: self.gateway.charge(order_id, 2990)

    def test_executed_then_replayed_returns_the_stored_response_without_running_again(self):
        order = unique("o")
        first = self.guard.run(payment(order, trace_id="trace-1", agent_id="agent-a"), self.charge(order))
        self.assertTrue(first.ok, first.error)
        self.assertTrue(first.executed)
        self.assertEqual(first.outcome, Outcome.EXECUTED)
        again = self.guard.run(payment(order, TriggerSource.LLM, trace_id="trace-2", agent_id="agent-a"), self.charge(order))
        self.assertEqual(again.outcome, Outcome.REPLAYED)
        self.assertFalse(again.executed)
        self.assertEqual(again.unwrap(), first.response)
        self.assertEqual(self.gateway.count(order), 1)
        self.assertEqual(status_of(first.key), "SUCCESS")

    def test_trigger_source_trace_id_and_agent_id_are_stored_in_attempts(self):
        order = unique("o")
        self.guard.run(payment(order, trace_id="t-initial", agent_id="agent-1"), self.charge(order))
        for source in ("llm", "framework", "http", "callback"):
            self.guard.run(payment(order, source, trace_id=f"t-{source}", agent_id="agent-2"), self.charge(order))
        got = rows(
            "SELECT trigger_source, outcome, trace_id, agent_id FROM idem.attempts"
            " WHERE idempotency_key = %s ORDER BY id",
            stable_key("payment", order, "pay"),
        )
        self.assertEqual(
            got,
            [("initial", "executed", "t-initial", "agent-1")]
            + [(s, "replayed", f"t-{s}", "agent-2") for s in ("llm", "framework", "http", "callback")],
        )

    def test_twenty_concurrent_callers_with_one_key_run_the_side_effect_once(self):
        order = unique("race")
        start = threading.Barrier(20)

        @counted
        def body():
            time.sleep(0.3)  # long enough that the others arrive while it is PROCESSING
            return self.gateway.charge(order, 2990)

        results = [None] * 20

        def caller(i):
            guard = Guard(WRITER_DSN)  # each caller its own connection, as separate agent workers
            try:
                with guard.session():
                    pass  # connected before the start, so that all twenty claim at once
                start.wait()
                results[i] = guard.run(payment(order, TriggerSource.FRAMEWORK if i else TriggerSource.INITIAL), body)
            finally:
                guard.close()

        in_threads(caller, 20)
        self.assertEqual(body.runs, 1)
        self.assertEqual(self.gateway.count(order), 1)
        self.assertEqual(sum(r.executed for r in results), 1)
        others = [r for r in results if not r.executed]
        for r in others:
            # Either still in progress (InProgress: do not retry) or already replayed with the response.
            if r.outcome is Outcome.IN_PROGRESS:
                self.assertIsInstance(r.error, idemwatch.InProgress)
            else:
                self.assertEqual(r.outcome, Outcome.REPLAYED)
                self.assertTrue(r.ok)
        # The race did happen: some callers came while the first was still PROCESSING.
        self.assertTrue(any(r.outcome is Outcome.IN_PROGRESS for r in others))
        key = stable_key("payment", order, "pay")
        self.assertEqual(scalar("SELECT count(*) FROM idem.attempts WHERE idempotency_key = %s", key), 20)
        self.assertEqual(
            scalar("SELECT count(*) FROM idem.attempts WHERE idempotency_key = %s AND outcome = 'executed'", key), 1
        )

    def test_callers_whose_role_runs_at_serializable_still_run_the_side_effect_once(self):
        """A driver or a role default that opens SERIALIZABLE (or REPEATABLE READ) transactions:
        racing callers may meet 40001, which the protocol runs again in a new transaction; every
        caller gets the contract's answer and the body runs once."""
        order = unique("serializable")
        writer = psycopg.conninfo.conninfo_to_dict(WRITER_DSN)["user"]
        with admin() as conn:
            conn.execute(f'ALTER ROLE "{writer}" SET default_transaction_isolation = \'serializable\'')
        try:
            start = threading.Barrier(12)

            @counted
            def body():
                time.sleep(0.2)
                return self.gateway.charge(order, 2990)

            results = [None] * 12

            def caller(i):
                guard = Guard(WRITER_DSN)
                try:
                    with guard.session() as protocol:
                        level = protocol.connection.execute("SHOW transaction_isolation").fetchone()[0]
                        self.assertEqual(level, "serializable")
                    start.wait()
                    results[i] = guard.run(payment(order, TriggerSource.HTTP if i else TriggerSource.INITIAL), body)
                finally:
                    guard.close()

            in_threads(caller, 12)
        finally:
            with admin() as conn:
                conn.execute(f'ALTER ROLE "{writer}" RESET default_transaction_isolation')
        self.assertEqual(body.runs, 1)
        self.assertEqual(self.gateway.count(order), 1)
        self.assertEqual(sum(r.executed for r in results), 1)
        for r in results:
            self.assertIn(r.outcome, (Outcome.EXECUTED, Outcome.IN_PROGRESS, Outcome.REPLAYED), r.error)

    def test_a_response_timeout_marks_unknown_and_the_retry_does_not_execute(self):
        order = unique("timeout")

        @counted
        def body():
            self.gateway.charge(order, 2990)  # the gateway charged; the answer is lost
            raise TimeoutError("gateway did not answer within 5s")

        first = self.guard.run(payment(order), body)
        self.assertIsInstance(first.error, idemwatch.OutcomeUnknown)
        self.assertIsInstance(first.error, idemwatch.DoNotRetry)
        self.assertIn("Do not retry", first.error.for_model())
        self.assertEqual(status_of(first.key), "UNKNOWN")
        for source in ("http", "llm", "framework"):
            retry = self.guard.run(payment(order, source), body)
            self.assertIsInstance(retry.error, idemwatch.InProgress)
            self.assertEqual(retry.error.status, RecordStatus.UNKNOWN)
            self.assertIn("uncertain", str(retry.error))
        self.assertEqual(body.runs, 1)
        self.assertEqual(self.gateway.count(order), 1)
        self.assertEqual(
            scalar("SELECT last_error FROM idem.records WHERE idempotency_key = %s", first.key),
            "TimeoutError: gateway did not answer within 5s",
        )

    def test_any_unclassified_exception_is_unknown_not_a_failure(self):
        order = unique("boom")

        def body():
            raise RuntimeError("socket closed mid-response")

        result = self.guard.run(payment(order), body)
        self.assertIsInstance(result.error, idemwatch.OutcomeUnknown)
        self.assertIsInstance(result.error.__cause__, RuntimeError)
        self.assertEqual(status_of(result.key), "UNKNOWN")

    def test_an_interrupt_in_the_body_is_reported_unknown_and_let_through(self):
        order = unique("interrupt")

        class Interrupt(BaseException):  # stands for KeyboardInterrupt / SystemExit
            pass

        def body():
            raise Interrupt()

        with self.assertRaises(Interrupt):
            self.guard.run(payment(order), body)
        self.assertEqual(status_of(stable_key("payment", order, "pay")), "UNKNOWN")

    def test_a_final_failure_is_handed_back_to_the_retry_instead_of_running_again(self):
        order = unique("declined")

        @counted
        def body():
            raise BusinessFailure("card declined: insufficient balance")

        first = self.guard.run(payment(order), body)
        self.assertIsInstance(first.error, idemwatch.FinalFailure)
        self.assertFalse(first.error.replayed)
        self.assertEqual(status_of(first.key), "FAILED")
        self.assertIs(scalar("SELECT retry_allowed FROM idem.records WHERE idempotency_key = %s", first.key), False)
        retry = self.guard.run(payment(order, TriggerSource.LLM), body)
        self.assertEqual(retry.outcome, Outcome.REPLAYED)
        self.assertIsInstance(retry.error, idemwatch.FinalFailure)
        self.assertTrue(retry.error.replayed)
        self.assertIn("card declined: insufficient balance", retry.error.error)
        self.assertIn("change the plan", retry.error.for_model())
        with self.assertRaises(idemwatch.FinalFailure):
            retry.unwrap()
        self.assertEqual(body.runs, 1)

    def test_a_request_that_never_left_may_run_again_with_the_same_key(self):
        order = unique("refused")

        @counted
        def body():
            if body.runs == 1:
                raise ConnectionRefusedError(111, "Connection refused")
            return self.gateway.charge(order, 2990)

        first = self.guard.run(payment(order), body)
        self.assertIsInstance(first.error, idemwatch.RetryableFailure)
        self.assertIsInstance(first.error, idemwatch.MayRetry)
        self.assertIs(scalar("SELECT retry_allowed FROM idem.records WHERE idempotency_key = %s", first.key), True)
        retry = self.guard.run(payment(order, TriggerSource.FRAMEWORK), body)
        self.assertTrue(retry.ok, retry.error)
        self.assertTrue(retry.executed)
        self.assertEqual(body.runs, 2)
        self.assertEqual(self.gateway.count(order), 1)
        self.assertEqual(status_of(first.key), "SUCCESS")

    def test_a_classifier_names_what_the_default_would_call_unknown(self):
        class GatewayUnreachable(Exception):
            pass

        guard = Guard(WRITER_DSN, classify=lambda e: idemwatch.Failure.NOT_SENT if isinstance(e, GatewayUnreachable) else None)
        try:
            sent = guard.run(payment(unique("classified")), raising(GatewayUnreachable("dns")))
            other = guard.run(payment(unique("classified")), raising(ValueError("parse")))
        finally:
            guard.close()
        self.assertIsInstance(sent.error, idemwatch.RetryableFailure)
        self.assertIs(scalar("SELECT retry_allowed FROM idem.records WHERE idempotency_key = %s", sent.key), True)
        self.assertIsInstance(other.error, idemwatch.OutcomeUnknown)  # None: the default decides

    def test_the_claim_token_stays_with_the_wrapper_so_another_instance_cannot_report(self):
        order = unique("token")
        key = stable_key("payment", order, "pay")
        seen = {}
        other = Guard(WRITER_DSN)

        def body():
            # While the first wrapper holds the claim, a second one neither runs nor reports.
            seen["second"] = other.run(payment(order, TriggerSource.CALLBACK), self.charge(order))
            with psycopg.connect(WRITER_DSN, autocommit=True) as conn:
                protocol = Protocol(conn)
                seen["no_token"] = protocol.complete(key, 1, {"forged": True}, None)
                seen["wrong_token"] = protocol.complete(key, 1, {"forged": True}, str(uuid.uuid4()))
                seen["fail"] = protocol.fail(key, 1, "forged", str(uuid.uuid4()))
                seen["unknown"] = protocol.mark_unknown(key, 1, "forged", None)
            return self.gateway.charge(order, 2990)

        try:
            result = self.guard.run(payment(order), body)
        finally:
            other.close()
        self.assertTrue(result.ok, result.error)
        self.assertIsInstance(seen["second"].error, idemwatch.InProgress)
        for name in ("no_token", "wrong_token", "fail", "unknown"):
            self.assertEqual(seen[name].result, ResultCode.NOT_CLAIMANT, name)
        self.assertEqual(result.response, scalar("SELECT response_payload FROM idem.records WHERE idempotency_key = %s", key))
        self.assertEqual(self.gateway.count(order), 1)

    def test_a_late_answer_after_the_lease_ran_out_is_recorded_not_rerun(self):
        order = unique("late")
        call = short_lease(order)

        @counted
        def body():
            self.assertGreaterEqual(outlive_the_lease(), 1)
            return self.gateway.charge(order, 2990)

        result = self.guard.run(call, body)
        self.assertTrue(result.ok, result.error)
        self.assertEqual(status_of(call.key), "SUCCESS")
        self.assertEqual(body.runs, 1)

    def test_a_claim_acknowledged_after_its_lease_is_given_back_and_never_run(self):
        order = unique("late-claim")
        call = short_lease(order)
        body = counted(self.charge(order))
        with key_held(call.key) as blocked:
            answer: dict = {}
            caller = threading.Thread(target=lambda: answer.update(result=self.guard.run(call, body)))
            caller.start()
            blocked()
            time.sleep(SHORT_LEASE.total_seconds() + 0.1)
        caller.join()
        result = answer["result"]
        self.assertIsInstance(result.error, idemwatch.RetryableFailure)
        self.assertIn("past its 0.5s lease", str(result.error))
        self.assertFalse(result.executed)
        self.assertEqual(body.runs, 0)
        self.assertEqual(self.gateway.count(order), 0)
        self.assertEqual(status_of(call.key), "FAILED")
        self.assertTrue(scalar("SELECT retry_allowed FROM idem.records WHERE idempotency_key = %s", call.key))
        # Given back by its own claimant, the key runs on the retry, once.
        retry = dataclasses.replace(call, context=dataclasses.replace(call.context, trigger_source=TriggerSource.FRAMEWORK))
        again = self.guard.run(retry, body)
        self.assertTrue(again.ok, again.error)
        self.assertEqual(body.runs, 1)
        self.assertEqual(self.gateway.count(order), 1)

    def test_a_report_the_layer_refuses_is_not_recorded_and_never_rerun(self):
        order = unique("settled")
        call = short_lease(order)

        @counted
        def body():
            outlive_the_lease()
            # A person decided meanwhile that it did not happen.
            got = scalar(
                "SELECT result FROM idem.settle(%s, 2, 'FAILED', 'gateway shows no charge')", call.key
            )
            self.assertEqual(got, "ok")
            return {"gateway_ref": "gw-late"}

        result = self.guard.run(call, body)
        self.assertIsInstance(result.error, idemwatch.NotRecorded)
        self.assertEqual(result.error.response, {"gateway_ref": "gw-late"})
        self.assertEqual(result.error.report.result, ResultCode.CONFLICT)
        self.assertEqual(status_of(call.key), "FAILED")
        self.assertEqual(body.runs, 1)

    def test_a_response_that_cannot_be_stored_is_not_recorded_and_never_rerun(self):
        order = unique("unstorable")

        @counted
        def body():
            answer = {"gateway_ref": "gw-x"}
            answer["self"] = answer  # not JSON
            return answer

        result = self.guard.run(payment(order), body)
        self.assertIsInstance(result.error, idemwatch.NotRecorded)
        self.assertIs(result.error.response["self"], result.error.response)
        retry = self.guard.run(payment(order, TriggerSource.LLM), body)
        self.assertIsInstance(retry.error, idemwatch.InProgress)
        self.assertEqual(body.runs, 1)

    def test_same_key_with_a_different_request_is_a_payload_mismatch(self):
        order = unique("mismatch")
        self.assertTrue(self.guard.run(payment(order), self.charge(order)).ok)
        other = self.guard.run(payment(order, TriggerSource.LLM, amount=9990), self.charge(order))
        self.assertEqual(other.outcome, Outcome.PAYLOAD_MISMATCH)
        self.assertIsInstance(other.error, idemwatch.PayloadMismatch)
        self.assertIsInstance(other.error, idemwatch.Refused)
        self.assertEqual(self.gateway.count(order), 1)

    def test_a_new_key_for_a_paid_business_object_is_rejected(self):
        order = unique("paid")
        self.assertTrue(self.guard.run(payment(order), self.charge(order)).ok)
        second = self.guard.run(payment(order, attempt=2), self.charge(order))
        self.assertEqual(second.outcome, Outcome.REJECTED)
        self.assertIsInstance(second.error, idemwatch.Rejected)
        self.assertEqual(self.gateway.count(order), 1)

    def test_a_retired_key_never_runs_again(self):
        order = unique("retired")
        call = payment(order)
        digest = scalar("SELECT encode(sha256(convert_to(%s::jsonb::text, 'UTF8')), 'hex')", psycopg.types.json.Jsonb(call.payload))
        with admin() as conn:
            conn.execute(
                "INSERT INTO idem.retired_keys (idempotency_key, biz_type, biz_id, request_hash, status)"
                " VALUES (%s, 'payment', %s, %s, 'SUCCESS')",
                (call.key, order, digest),
            )
        result = self.guard.run(call, self.charge(order))
        self.assertEqual(result.outcome, Outcome.RETIRED)
        self.assertIsInstance(result.error, idemwatch.Retired)
        self.assertEqual(self.gateway.count(order), 0)

    def test_an_unreachable_database_means_nothing_ran_and_the_call_may_be_retried(self):
        guard = Guard("host=/nonexistent-idemwatch-socket port=1 connect_timeout=1")
        guard.resend_pauses = (0.05, 0.05)  # sent three times, then given up
        ran = []
        result = guard.run(payment(unique("down")), lambda: ran.append(1))
        self.assertIsInstance(result.error, idemwatch.Unavailable)
        self.assertIsInstance(result.error, idemwatch.MayRetry)
        self.assertEqual(ran, [])

    def test_a_connection_inside_a_transaction_is_refused(self):
        with psycopg.connect(WRITER_DSN) as conn:  # not autocommit
            conn.execute("SELECT 1")  # a transaction is now open
            with self.assertRaises(idemwatch.ProtocolMisuse):
                Protocol(conn).begin(
                    unique("k"), "payment", unique("o"), "pay", trigger_source="initial", payload={}
                )

    def test_a_pool_lends_a_connection_per_step_and_none_while_the_body_runs(self):
        class Pool:  # the shape of psycopg_pool.ConnectionPool: connection() commits and gives back
            def __init__(self):
                self.lent = 0
                self.borrows = 0

            @contextlib.contextmanager
            def connection(self):
                self.lent += 1
                self.borrows += 1
                with psycopg.connect(WRITER_DSN) as conn:  # not autocommit, as a pool's default
                    yield conn
                self.lent -= 1

        pool = Pool()
        guard = Guard(pool)
        order = unique("pool")
        lent_during_body = []

        def body():
            lent_during_body.append(pool.lent)
            return self.gateway.charge(order, 2990)

        self.assertTrue(guard.run(payment(order), body).ok)
        self.assertEqual(lent_during_body, [0])
        self.assertEqual(pool.borrows, 2)  # begin, complete: each its own committed step
        self.assertEqual(status_of(stable_key("payment", order, "pay")), "SUCCESS")
        self.assertEqual(guard.run(payment(order, TriggerSource.LLM), body).outcome, Outcome.REPLAYED)
        self.assertEqual(self.gateway.count(order), 1)

    def test_the_writer_role_has_protocol_rights_only(self):
        # The guard's tests run as this role: it can call begin but not read or write the tables.
        with psycopg.connect(WRITER_DSN, autocommit=True) as conn:
            with self.assertRaises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT count(*) FROM idem.records")
        self.assertNotEqual(WRITER_DSN, ADMIN_DSN)


class DecoratorTest(unittest.TestCase):
    def setUp(self):
        self.guard = Guard(WRITER_DSN)
        self.gateway = Gateway()
        gateway = self.gateway

        @self.guard.tool(biz_type="payment", biz_id="order_id", payload=lambda a: {k: a[k] for k in ("order_id", "amount_minor")})
        def pay(order_id: str, amount_minor: int, note: str = "") -> dict:
            """Charge the customer for an order."""
            return gateway.charge(order_id, amount_minor)

        self.pay = pay

    def tearDown(self):
        self.guard.close()

    def test_the_decorated_tool_keys_by_business_object_and_reads_the_stated_context(self):
        order = unique("deco")
        with call_context(trigger_source="initial", trace_id="run-7", agent_id="shopper"):
            first = self.pay(order_id=order, amount_minor=2990, note="first try")
        with call_context(trigger_source=TriggerSource.LLM, trace_id="run-7", agent_id="shopper"):
            # The model re-issued the call with a different free-text note: same intent, same key.
            again = self.pay(order, 2990, note="retrying because it looked slow")
        self.assertEqual(first, again)
        self.assertEqual(self.gateway.count(order), 1)
        self.assertEqual(self.pay.__doc__, "Charge the customer for an order.")
        got = rows(
            "SELECT trigger_source, outcome, trace_id, agent_id, tool, biz_id FROM idem.attempts"
            " WHERE idempotency_key = %s ORDER BY id",
            stable_key("payment", order, "pay"),
        )
        self.assertEqual(
            got,
            [("initial", "executed", "run-7", "shopper", "pay", order), ("llm", "replayed", "run-7", "shopper", "pay", order)],
        )

    def test_the_decorated_tool_raises_do_not_retry_errors(self):
        order = unique("deco-fail")

        @self.guard.tool(biz_type="payment", biz_id="order_id", tool="pay")
        def declined(order_id: str) -> dict:
            raise BusinessFailure("insufficient balance")

        with self.assertRaises(idemwatch.FinalFailure):
            declined(order)
        with call_context(trigger_source="llm"):
            with self.assertRaises(idemwatch.FinalFailure) as raised:
                declined(order_id=order)
        self.assertTrue(raised.exception.replayed)


if __name__ == "__main__":
    unittest.main()
