"""AsyncGuard against a real PostgreSQL: the same decisions as Guard, from asyncio."""

from __future__ import annotations

import asyncio
import functools
import unittest

import idemwatch
from idemwatch import AsyncGuard, BusinessFailure, Outcome, TriggerSource, call_context, stable_key

from . import support
from .support import WRITER_DSN, Gateway, counted, rows, scalar, status_of, unique


# Every call of these tests comes from the one asyncio agent.
payment = functools.partial(support.payment, agent_id="async-agent")


class AsyncGuardTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.guard = AsyncGuard(WRITER_DSN)
        self.gateway = Gateway()

    async def asyncTearDown(self):
        await self.guard.close()

    async def test_twenty_concurrent_tasks_with_one_key_run_the_side_effect_once(self):
        order = unique("arace")

        @counted
        async def body():
            await asyncio.sleep(0.3)
            return self.gateway.charge(order, 2990)

        guards = [AsyncGuard(WRITER_DSN) for _ in range(20)]  # separate connections
        for g in guards:
            async with g.session():
                pass  # connected before the start, so that all twenty claim at once
        try:
            results = await asyncio.gather(
                *(g.run(payment(order, TriggerSource.FRAMEWORK if i else TriggerSource.INITIAL), body) for i, g in enumerate(guards))
            )
        finally:
            await asyncio.gather(*(g.close() for g in guards))
        self.assertEqual(body.runs, 1)
        self.assertEqual(self.gateway.count(order), 1)
        self.assertEqual(sum(r.executed for r in results), 1)
        for r in results:
            if not r.executed:
                self.assertIn(r.outcome, (Outcome.IN_PROGRESS, Outcome.REPLAYED))
        self.assertTrue(any(r.outcome is Outcome.IN_PROGRESS for r in results))  # the race did happen
        self.assertEqual(
            scalar("SELECT count(*) FROM idem.attempts WHERE idempotency_key = %s", stable_key("payment", order, "pay")), 20
        )

    async def test_a_missed_deadline_marks_unknown_and_the_retry_does_not_execute(self):
        order = unique("adeadline")

        @counted
        async def body():
            self.gateway.charge(order, 2990)
            await asyncio.sleep(30)  # the answer never comes in time

        first = await self.guard.run(payment(order), body, timeout=0.05)
        self.assertIsInstance(first.error, idemwatch.OutcomeUnknown)
        self.assertEqual(status_of(first.key), "UNKNOWN")
        retry = await self.guard.run(payment(order, TriggerSource.HTTP), body, timeout=0.05)
        self.assertIsInstance(retry.error, idemwatch.InProgress)
        self.assertEqual(body.runs, 1)
        self.assertEqual(
            scalar("SELECT last_error FROM idem.records WHERE idempotency_key = %s", first.key),
            "TimeoutError: no answer within 0.05 s",
        )

    async def test_a_cancelled_task_is_reported_unknown_and_stays_cancelled(self):
        order = unique("acancel")
        started = asyncio.Event()

        async def body():
            started.set()
            await asyncio.sleep(30)

        task = asyncio.ensure_future(self.guard.run(payment(order), body))
        await started.wait()
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        self.assertEqual(status_of(stable_key("payment", order, "pay")), "UNKNOWN")

    async def test_a_final_failure_is_handed_back_to_the_retry(self):
        order = unique("adeclined")

        @counted
        async def body():
            raise BusinessFailure("card declined")

        first = await self.guard.run(payment(order), body)
        self.assertIsInstance(first.error, idemwatch.FinalFailure)
        retry = await self.guard.run(payment(order, TriggerSource.LLM), body)
        self.assertIsInstance(retry.error, idemwatch.FinalFailure)
        self.assertTrue(retry.error.replayed)
        self.assertIn("card declined", retry.error.error)
        self.assertEqual(body.runs, 1)

    async def test_the_decorated_async_tool_reads_the_context_of_its_task(self):
        order = unique("adeco")
        gateway = self.gateway

        @self.guard.tool(biz_type="payment", biz_id="order_id", tool="pay", timeout=5)
        async def pay(order_id: str, amount_minor: int) -> dict:
            return gateway.charge(order_id, amount_minor)

        with call_context("initial", trace_id="arun-1"):
            first = await pay(order_id=order, amount_minor=2990)
        with call_context("callback", trace_id="arun-1"):
            again = await asyncio.ensure_future(pay(order, 2990))  # a task inherits the context
        self.assertEqual(first, again)
        self.assertEqual(gateway.count(order), 1)
        self.assertEqual(
            rows(
                "SELECT trigger_source, outcome, trace_id FROM idem.attempts WHERE idempotency_key = %s ORDER BY id",
                stable_key("payment", order, "pay"),
            ),
            [("initial", "executed", "arun-1"), ("callback", "replayed", "arun-1")],
        )


if __name__ == "__main__":
    unittest.main()
