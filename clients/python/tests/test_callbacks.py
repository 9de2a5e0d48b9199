"""ingest_callback against a real PostgreSQL: the gateway's webhook, on a login holding only
idem_ledger, decides an UNKNOWN record by the key the client gave the gateway."""

from __future__ import annotations

import threading
import unittest

import psycopg

from idemwatch import (
    CallbackResult,
    FundFlowKind,
    Protocol,
    RecordStatus,
    StatementLineResult,
    TriggerSource,
    ingest_callback,
    stable_key,
    stripe_metadata,
)

from .support import LEDGER_DSN, WRITER_DSN, in_threads, scalar, status_of, unique


def unknown_payment(order: str, amount: int = 2990) -> str:
    """A payment whose outcome is lost: claimed and marked UNKNOWN through the client, as the guard
    does when the gateway does not answer. Its key."""
    key = stable_key("payment", order, "pay")
    with psycopg.connect(WRITER_DSN, autocommit=True) as conn:
        protocol = Protocol(conn)
        payload = {"order_id": order, "amount_minor": amount, "currency": "EUR"}
        begun = protocol.begin(key, "payment", order, "pay", trigger_source=TriggerSource.INITIAL, payload=payload)
        marked = protocol.mark_unknown(key, begun.version, "TimeoutError: no answer in 5s", begun.claim_token)
        assert marked.ok, marked
    assert status_of(key) == "UNKNOWN"
    return key


def flows_of(order: str) -> int:
    return scalar("SELECT count(*) FROM idem.fund_flows WHERE biz_id = %s", order)


class IngestCallbackTest(unittest.TestCase):
    def setUp(self):
        self.conn = psycopg.connect(LEDGER_DSN, autocommit=True)

    def tearDown(self):
        self.conn.close()

    def deliver(self, key: str, event_id: str, charge: str, amount: int = 2990, conn=None) -> CallbackResult:
        """Stripe's charge.succeeded for the charge, naming the key it was given in metadata."""
        event = {"id": event_id, "type": "charge.succeeded", "data": {"object": {"id": charge, "metadata": stripe_metadata(key)}}}
        return ingest_callback(
            conn or self.conn,
            gateway="stripe",
            event_id=event_id,
            kind=FundFlowKind.DEBIT,
            amount_minor=amount,
            currency="EUR",
            gateway_ref=charge,
            idempotency_key=event["data"]["object"]["metadata"]["idempotency_key"],
            payload=event,
        )

    def test_a_callback_naming_the_key_resolves_an_unknown_record_success(self):
        order = unique("cb")
        key = unknown_payment(order)
        got = self.deliver(key, unique("evt"), unique("ch"))
        self.assertEqual(got.result, StatementLineResult.MATCHED)
        self.assertTrue(got.matched)
        self.assertEqual(got.record_key, key)
        self.assertIsInstance(got.flow_id, int)
        self.assertEqual(got.record_status, RecordStatus.SUCCESS)
        self.assertFalse(got.already_received)
        self.assertEqual(status_of(key), "SUCCESS")
        self.assertEqual(flows_of(order), 1)
        self.assertEqual(
            scalar("SELECT recorded_by FROM idem.fund_flows WHERE id = %s", got.flow_id), "ledger"
        )

    def test_a_redelivery_returns_the_same_answer_and_records_no_second_flow(self):
        order = unique("redelivered")
        key = unknown_payment(order)
        event_id, charge = unique("evt"), unique("ch")
        first = self.deliver(key, event_id, charge)
        again = self.deliver(key, event_id, charge)
        self.assertTrue(again.already_received)
        self.assertEqual((again.result, again.record_key, again.flow_id, again.record_status),
                         (first.result, first.record_key, first.flow_id, first.record_status))
        self.assertEqual(flows_of(order), 1)
        self.assertEqual(scalar("SELECT count(*) FROM idem.gateway_events WHERE event_id = %s", event_id), 1)

    def test_a_callback_with_another_amount_is_mismatched_and_leaves_the_record_unknown(self):
        order = unique("other-amount")
        key = unknown_payment(order, amount=2990)
        got = self.deliver(key, unique("evt"), unique("ch"), amount=2999)
        self.assertEqual(got.result, StatementLineResult.MISMATCHED)
        self.assertEqual(got.record_key, key)
        self.assertIsNone(got.flow_id)
        self.assertEqual(got.record_status, RecordStatus.UNKNOWN)
        self.assertEqual(status_of(key), "UNKNOWN")
        self.assertEqual(flows_of(order), 0)

    def test_two_concurrent_deliveries_of_one_event_record_one_event_and_one_flow(self):
        order = unique("concurrent")
        key = unknown_payment(order)
        event_id, charge = unique("evt"), unique("ch")
        start = threading.Barrier(2)
        results: list = [None, None]

        def webhook(i: int) -> None:
            with psycopg.connect(LEDGER_DSN, autocommit=True) as conn:  # each delivery its own worker
                start.wait()
                results[i] = self.deliver(key, event_id, charge, conn=conn)

        in_threads(webhook, 2)
        self.assertEqual(sorted(r.already_received for r in results), [False, True])
        for r in results:
            self.assertEqual(r.result, StatementLineResult.MATCHED)
            self.assertEqual(r.record_status, RecordStatus.SUCCESS)
        self.assertEqual(results[0].flow_id, results[1].flow_id)
        self.assertEqual(scalar("SELECT count(*) FROM idem.gateway_events WHERE event_id = %s", event_id), 1)
        self.assertEqual(flows_of(order), 1)
        self.assertEqual(status_of(key), "SUCCESS")

    def test_arguments_are_checked_before_anything_is_sent(self):
        good = dict(gateway="stripe", event_id="evt-x", kind="DEBIT", amount_minor=100, currency="EUR", gateway_ref="ch-x")
        cases = [
            (dict(kind="debit"), "fund flow kind (DEBIT, CREDIT, REFUND, FREEZE, UNFREEZE, CAPTURE)"),
            (dict(kind="PAYOUT"), "fund flow kind"),
            (dict(amount_minor=-1), "amount_minor must be an integer"),
            (dict(amount_minor=29.9), "amount_minor must be an integer"),
            (dict(amount_minor="2990"), "amount_minor must be an integer"),
            (dict(amount_minor=True), "amount_minor must be an integer"),
            (dict(amount_minor=10**15), "amount_minor must be an integer"),
            (dict(currency="eur"), "three capital letters"),
            (dict(currency="EURO"), "three capital letters"),
            (dict(currency=None), "three capital letters"),
            (dict(gateway="stripe live"), "gateway must be"),
            (dict(event_id=" "), "event_id"),
            (dict(gateway_ref=None), "gateway_ref"),
            (dict(idempotency_key=""), "idempotency_key"),
            (dict(biz_id="x" * 256), "biz_id must be a non-blank string of at most 255 characters, or None, got 256 characters"),
        ]
        for change, message in cases:
            with self.assertRaises(ValueError, msg=repr(change)) as raised:
                ingest_callback(self.conn, **{**good, **change})
            self.assertIn(message, str(raised.exception), change)
        self.assertEqual(scalar("SELECT count(*) FROM idem.gateway_events WHERE event_id = 'evt-x'"), 0)

    def test_the_writer_role_cannot_speak_for_the_gateway(self):
        with psycopg.connect(WRITER_DSN, autocommit=True) as conn:
            with self.assertRaises(psycopg.errors.InsufficientPrivilege):
                ingest_callback(
                    conn, gateway="stripe", event_id=unique("evt"), kind="DEBIT", amount_minor=1,
                    currency="EUR", gateway_ref=unique("ch"), idempotency_key="k",
                )


if __name__ == "__main__":
    unittest.main()
