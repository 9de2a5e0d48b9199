// The key where each gateway keeps it, whole, or a refusal that says why; the same rules as the
// Python client.
import assert from "node:assert/strict";
import { test } from "node:test";

import { adyenMerchantReference, compactKey, sepaEndToEndId, stableKey, stripeMetadata } from "../src";

test("Stripe: the key and the business object go under the names the statement reader reads", () => {
  const key = stableKey("payment", "order-42", "pay");
  assert.deepEqual(stripeMetadata(key), { idempotency_key: "payment/order-42:pay:1" });
  assert.deepEqual(stripeMetadata(key, "order-42"), { idempotency_key: "payment/order-42:pay:1", biz_id: "order-42" });
  const long = stableKey("payment", "x".repeat(300), "pay");
  assert.equal(stripeMetadata(long).idempotency_key, long);
});

test("Stripe: blank keys and business ids are refused", () => {
  for (const bad of ["", "  ", null, 42] as unknown as string[]) {
    assert.throws(() => stripeMetadata(bad), TypeError, String(bad));
  }
  assert.throws(() => stripeMetadata("k", " "), /bizId/);
  assert.throws(() => stripeMetadata("k", "x".repeat(501)), /500/);
});

test("Adyen: the key is the merchant reference as it is", () => {
  assert.equal(adyenMerchantReference("payment/order-42:pay:1"), "payment/order-42:pay:1");
  assert.equal(adyenMerchantReference("k".repeat(80)), "k".repeat(80));
});

test("Adyen: a key over 80 characters is refused naming the limit", () => {
  const key = stableKey("payment", "x".repeat(100), "pay");
  assert.throws(
    () => adyenMerchantReference(key),
    (err: Error) =>
      err instanceof TypeError && err.message.includes("80") && err.message.includes(`${key.length} characters`) &&
      err.message.includes("compactKey"),
  );
  const compact = compactKey("payment", "x".repeat(100), "pay");
  assert.equal(adyenMerchantReference(compact), compact);
});

test("SEPA: a key that fits is the EndToEndId as it is", () => {
  assert.equal(sepaEndToEndId("payment/order-42:pay:1"), "payment/order-42:pay:1");
  const allowed = "aZ09/-?:().,'+ x";
  assert.equal(sepaEndToEndId(allowed), allowed);
  assert.equal(sepaEndToEndId("k".repeat(35)), "k".repeat(35));
});

test("SEPA: refusals say why and how to derive a key that fits", () => {
  const cases: Array<[string, string]> = [
    ["k".repeat(36), "36 characters"],
    [stableKey("payment", "a/b", "pay"), "'%' is outside SEPA's character set"],
    ["pay_ment/é:1", "'_' 'é' are outside SEPA's character set"],
    ["/payment:1", "start or end with '/'"],
    ["payment:1/", "start or end with '/'"],
    ["pay//ment:1", "'//'"],
    ["NOTPROVIDED", "gives no EndToEndId"],
  ];
  for (const [key, why] of cases) {
    assert.throws(
      () => sepaEndToEndId(key),
      (err: Error) =>
        err instanceof TypeError && err.message.includes(why) && err.message.includes("compactKey") &&
        err.message.includes(key.length > 35 ? "35" : "EndToEndId"),
      key,
    );
  }
  for (const bad of ["", " ", null] as unknown as string[]) assert.throws(() => sepaEndToEndId(bad), TypeError);
});
