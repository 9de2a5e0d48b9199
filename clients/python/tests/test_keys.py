"""stable_key and compact_key: one key per business intent, whatever retries it."""

from __future__ import annotations

import unittest

from idemwatch import compact_key, mcp_meta, sepa_end_to_end_id, stable_key, tool_call_key
from idemwatch.keys import COMPACT_KEY_LENGTH, MAX_KEY_LENGTH, MAX_TOOL_CALL_KEY_LENGTH


class StableKeyTest(unittest.TestCase):
    def test_the_same_intent_gives_the_same_key_every_time(self):
        self.assertEqual(stable_key("payment", "order-42", "pay"), stable_key("payment", "order-42", "pay", 1))
        self.assertEqual(stable_key("payment", "order-42", "pay"), "payment/order-42:pay:1")

    def test_a_business_attempt_is_a_new_key_a_retry_is_not(self):
        self.assertNotEqual(stable_key("payment", "order-42", "pay", 1), stable_key("payment", "order-42", "pay", 2))

    def test_separators_in_the_parts_cannot_make_two_intents_one_key(self):
        self.assertNotEqual(stable_key("payment", "a:b", "c"), stable_key("payment", "a", "b:c"))
        self.assertNotEqual(stable_key("pay/ment", "x", "t"), stable_key("pay", "ment/x", "t"))
        self.assertNotEqual(stable_key("payment", "100%3A", "t"), stable_key("payment", "100:", "t"))

    def test_a_long_business_id_keeps_a_readable_prefix_and_fits_the_schema(self):
        long_id = "x" * 300
        key = stable_key("payment", long_id, "pay")
        self.assertEqual(len(key), MAX_KEY_LENGTH)
        self.assertTrue(key.startswith("payment/xxx"))
        self.assertEqual(key, stable_key("payment", long_id, "pay"))
        self.assertNotEqual(key, stable_key("payment", long_id + "y", "pay"))

    def test_the_long_form_matches_the_typescript_clients_byte_for_byte(self):
        # The same pinned value as clients/typescript/test/keys.test.ts.
        self.assertEqual(
            stable_key("payment", "é" * 300, "pay"),
            "payment/" + "é" * 182 + "~3ae18829a6863e08e2b8f0da7c0e3b0b63473d41259f1d79b50e1a60c50dc922",
        )

    def test_attempt_must_be_stated_as_a_positive_integer(self):
        for bad in (0, -1, "1", 1.0, True, None):
            with self.assertRaises(ValueError, msg=repr(bad)):
                stable_key("payment", "o", "pay", bad)

    def test_blank_parts_are_refused(self):
        with self.assertRaises(ValueError):
            stable_key("payment", " ", "pay")
        with self.assertRaises(ValueError):
            stable_key("", "o", "pay")


class CompactKeyTest(unittest.TestCase):
    def test_a_stable_key_that_fits_sepa_is_kept_as_it_is(self):
        self.assertEqual(compact_key("payment", "order-42", "pay"), "payment/order-42:pay:1")
        self.assertEqual(compact_key("payment", "order-42", "pay", 2), stable_key("payment", "order-42", "pay", 2))

    def test_a_longer_or_escaped_key_becomes_a_readable_start_and_a_digest(self):
        uuid_id = "3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b"
        key = compact_key("payment", uuid_id, "pay")
        self.assertEqual(key, compact_key("payment", uuid_id, "pay"))
        self.assertRegex(key, r"^payment-3f2a9c\.[0-9a-f]{20}$")
        self.assertNotEqual(key, compact_key("payment", uuid_id, "pay", 2))
        escaped = compact_key("payment", "a/b", "pay")  # '%' is outside SEPA's set
        self.assertRegex(escaped, r"^payment-a-2Fb\.[0-9a-f]{20}$")
        self.assertNotEqual(escaped, compact_key("payment", "a-b", "pay"))

    def test_every_compact_key_is_a_sepa_end_to_end_id(self):
        for parts in (("payment", "x" * 300, "pay"), ("支付", "é", "付"), ("p", "order 42", "t"), ("payment", "o", "pay")):
            key = compact_key(*parts)
            self.assertLessEqual(len(key), COMPACT_KEY_LENGTH, parts)
            self.assertEqual(sepa_end_to_end_id(key), key)

    def test_the_digest_form_matches_the_typescript_clients_byte_for_byte(self):
        # The same pinned value as clients/typescript/test/keys.test.ts.
        self.assertEqual(compact_key("payment", "é" * 300, "pay"), "payment-3ae188.54f5e47ef7b30f70ac90")

    def test_its_parts_are_checked_as_stable_keys_are(self):
        with self.assertRaises(ValueError):
            compact_key("payment", " ", "pay")
        with self.assertRaises(ValueError):
            compact_key("payment", "o", "pay", 0)


if __name__ == "__main__":
    unittest.main()


class ToolCallKeyTest(unittest.TestCase):
    def test_a_tool_calls_key_names_the_run_the_step_and_the_tool_as_the_typescript_clients(self):
        self.assertEqual(tool_call_key("run 7/ä", 3, "charge"), "run:run%207%2F%C3%A4:3:charge")
        self.assertEqual(tool_call_key("r1", "turn-2.call-0", "charge"), "run:r1:turn-2.call-0:charge")
        self.assertNotEqual(tool_call_key("a:b", 1, "c"), tool_call_key("a", 1, "b:c"))
        self.assertNotEqual(tool_call_key("r1", 1, "charge"), tool_call_key("r1", 2, "charge"))

    def test_a_long_run_id_gives_a_key_the_proxy_takes_still_one_per_call(self):
        key = tool_call_key("x" * 400, 1, "charge")
        self.assertEqual(len(key), MAX_TOOL_CALL_KEY_LENGTH)
        self.assertRegex(key, r"^run:x+~[0-9a-f]{64}$")
        self.assertNotEqual(key, tool_call_key("x" * 400, 2, "charge"))

    def test_it_refuses_what_is_not_a_run_a_step_or_a_tool(self):
        with self.assertRaisesRegex(ValueError, "run_id must be a non-blank string"):
            tool_call_key("", 1, "charge")
        with self.assertRaisesRegex(ValueError, "step must be an integer >= 0"):
            tool_call_key("r", -1, "charge")
        with self.assertRaisesRegex(ValueError, "step must be an integer >= 0"):
            tool_call_key("r", True, "charge")

    def test_mcp_meta_carries_the_key_where_the_proxy_reads_it(self):
        self.assertEqual(mcp_meta("run:r1:1:charge"), {"io.idemwatch/idempotencyKey": "run:r1:1:charge"})
        with self.assertRaisesRegex(ValueError, "printable ASCII"):
            mcp_meta("é")
        with self.assertRaisesRegex(ValueError, "printable ASCII"):
            mcp_meta("k" * 201)
