"""The seeds' fault test, driven from Python: a proxy drops 20% of successful gateway responses,
every layer retries (HTTP client, framework, model, the gateway's webhook), and charges : orders
stays exactly 1 : 1. The reconciler then settles the unknown ones from the gateway's ledger."""

from __future__ import annotations

import random
import threading
import unittest

import psycopg

from idemwatch import Guard, Protocol, ResponseTimeout, ToolCall, TriggerSource, stable_key

from .support import LEDGER_DSN, WRITER_DSN, Gateway, in_threads, payment, rows, scalar, unique

ORDERS = 60
DROP_RATE = 0.2
RETRY_SOURCES = (TriggerSource.HTTP, TriggerSource.FRAMEWORK, TriggerSource.LLM, TriggerSource.CALLBACK)


class FaultTest(unittest.TestCase):
    def test_dropped_responses_and_retries_from_every_source_keep_charges_to_orders_one_to_one(self):
        run = unique("fault")
        orders = [f"{run}-{i}" for i in range(ORDERS)]
        gateway = Gateway()
        rng = random.Random(20240607)
        drop = {order: rng.random() < DROP_RATE for order in orders}
        executions = []
        lock = threading.Lock()
        webhook_queue: list[tuple[str, str]] = []

        def call(order: str, source: TriggerSource) -> ToolCall:
            return payment(order, source, trace_id=f"trace-{order}", agent_id="fault-agent")

        def body_for(order: str):
            def body():
                with lock:
                    executions.append(order)
                answer = gateway.charge(order, 2990)
                with lock:
                    webhook_queue.append((order, answer["gateway_ref"]))
                if drop[order]:
                    raise ResponseTimeout("proxy dropped the gateway's response")
                return answer

            return body

        def agent(worker: int):
            guard = Guard(WRITER_DSN)
            try:
                for order in orders[worker::4]:
                    result = guard.run(call(order, TriggerSource.INITIAL), body_for(order))
                    for source in RETRY_SOURCES:
                        if result.ok:
                            break
                        # Every layer retries whatever failed: the guard is what keeps it safe.
                        result = guard.run(call(order, source), body_for(order))
            finally:
                guard.close()

        in_threads(agent, 4)

        dropped = [o for o in orders if drop[o]]
        self.assertGreater(len(dropped), 0)
        self.assertEqual(len(executions), ORDERS)
        self.assertEqual(sorted(executions), sorted(orders))

        # The gateway's webhooks, on its own login (idem_ledger): the ledger line, then the
        # callback re-drives the tool call.
        with psycopg.connect(LEDGER_DSN, autocommit=True) as conn:
            protocol = Protocol(conn)
            for order, ref in webhook_queue:
                protocol.record_fund_flow("payment", order, "DEBIT", 2990, "CNY", ref, stable_key("payment", order, "pay"))
        self.assertEqual(
            scalar("SELECT count(*) FROM idem.records WHERE biz_id LIKE %s AND status = 'UNKNOWN'", run + "-%"),
            len(dropped),
        )
        scalar("SELECT idem.reconcile()")  # as the superuser here; idem_reconciler in production

        redriver = Guard(WRITER_DSN)
        try:
            for order in orders:
                result = redriver.run(call(order, TriggerSource.CALLBACK), body_for(order))
                self.assertTrue(result.ok, result.error)
                self.assertFalse(result.executed)
        finally:
            redriver.close()

        for order in orders:
            self.assertEqual(gateway.count(order), 1, order)
        self.assertEqual(len(executions), ORDERS)
        self.assertEqual(
            scalar("SELECT count(*) FROM idem.records WHERE biz_id LIKE %s AND status = 'SUCCESS'", run + "-%"), ORDERS
        )
        self.assertEqual(
            rows(
                "SELECT count(*), count(duplicate_of) FROM idem.fund_flows WHERE biz_id LIKE %s AND kind = 'DEBIT'",
                run + "-%",
            ),
            [(ORDERS, 0)],
        )
        sources = {
            s
            for (s,) in rows("SELECT DISTINCT trigger_source FROM idem.attempts WHERE biz_id LIKE %s", run + "-%")
        }
        self.assertEqual(sources, {"initial", "http", "framework", "llm", "callback"})
        self.assertEqual(
            scalar("SELECT count(*) FROM idem.attempts WHERE biz_id LIKE %s AND outcome = 'executed'", run + "-%"),
            ORDERS,
        )


if __name__ == "__main__":
    unittest.main()
