"""gateway_refs: the key where each gateway keeps it, whole, or a refusal that says why."""

from __future__ import annotations

import unittest

from idemwatch import adyen_merchant_reference, compact_key, sepa_end_to_end_id, stable_key, stripe_metadata


class StripeMetadataTest(unittest.TestCase):
    def test_the_key_and_the_business_object_go_under_the_names_the_statement_reader_reads(self):
        key = stable_key("payment", "order-42", "pay")
        self.assertEqual(stripe_metadata(key), {"idempotency_key": "payment/order-42:pay:1"})
        self.assertEqual(
            stripe_metadata(key, biz_id="order-42"), {"idempotency_key": "payment/order-42:pay:1", "biz_id": "order-42"}
        )

    def test_a_key_of_the_schemas_full_length_fits(self):
        key = stable_key("payment", "x" * 300, "pay")
        self.assertEqual(stripe_metadata(key)["idempotency_key"], key)

    def test_blank_keys_and_business_ids_are_refused(self):
        for bad in ("", "  ", None, 42):
            with self.assertRaises(ValueError, msg=repr(bad)):
                stripe_metadata(bad)
        with self.assertRaisesRegex(ValueError, "biz_id"):
            stripe_metadata("k", biz_id=" ")
        with self.assertRaisesRegex(ValueError, "500"):
            stripe_metadata("k", biz_id="x" * 501)


class AdyenMerchantReferenceTest(unittest.TestCase):
    def test_the_key_is_the_merchant_reference_as_it_is(self):
        self.assertEqual(adyen_merchant_reference("payment/order-42:pay:1"), "payment/order-42:pay:1")
        self.assertEqual(adyen_merchant_reference("k" * 80), "k" * 80)

    def test_a_key_over_80_characters_is_refused_naming_the_limit(self):
        key = stable_key("payment", "x" * 100, "pay")
        with self.assertRaises(ValueError) as raised:
            adyen_merchant_reference(key)
        message = str(raised.exception)
        self.assertIn("80", message)
        self.assertIn(f"{len(key)} characters", message)
        self.assertIn("compact_key", message)
        self.assertEqual(adyen_merchant_reference(compact_key("payment", "x" * 100, "pay")), compact_key("payment", "x" * 100, "pay"))


class SepaEndToEndIdTest(unittest.TestCase):
    def test_a_key_that_fits_is_the_end_to_end_id_as_it_is(self):
        self.assertEqual(sepa_end_to_end_id("payment/order-42:pay:1"), "payment/order-42:pay:1")
        allowed = "aZ09/-?:().,'+ x"
        self.assertEqual(sepa_end_to_end_id(allowed), allowed)
        self.assertEqual(sepa_end_to_end_id("k" * 35), "k" * 35)

    def test_refusals_say_why_and_how_to_derive_a_key_that_fits(self):
        cases = {
            "k" * 36: "36 characters",
            stable_key("payment", "a/b", "pay"): "'%' is outside SEPA's character set",
            "pay_ment/é:1": "'_' 'é' are outside SEPA's character set",
            "/payment:1": "start or end with '/'",
            "payment:1/": "start or end with '/'",
            "pay//ment:1": "'//'",
            "NOTPROVIDED": "gives no EndToEndId",
        }
        for key, why in cases.items():
            with self.assertRaises(ValueError, msg=key) as raised:
                sepa_end_to_end_id(key)
            message = str(raised.exception)
            self.assertIn(why, message, key)
            self.assertIn("35" if len(key) > 35 else "EndToEndId", message)
            self.assertIn("compact_key", message)

    def test_blank_keys_are_refused(self):
        for bad in ("", " ", None):
            with self.assertRaises(ValueError, msg=repr(bad)):
                sepa_end_to_end_id(bad)


if __name__ == "__main__":
    unittest.main()
