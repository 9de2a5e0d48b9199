// stableKey and compactKey: one key per business intent, whatever retries it; the same keys as the
// Python client.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  COMPACT_KEY_LENGTH,
  MAX_KEY_LENGTH,
  MAX_TOOL_CALL_KEY_LENGTH,
  MCP_KEY_FIELD,
  compactKey,
  mcpMeta,
  sepaEndToEndId,
  stableKey,
  toolCallKey,
} from "../src";

test("the same intent gives the same key every time", () => {
  assert.equal(stableKey("payment", "order-42", "pay"), stableKey("payment", "order-42", "pay", 1));
  assert.equal(stableKey("payment", "order-42", "pay"), "payment/order-42:pay:1");
});

test("a business attempt is a new key, a retry is not", () => {
  assert.notEqual(stableKey("payment", "order-42", "pay", 1), stableKey("payment", "order-42", "pay", 2));
});

test("separators in the parts cannot make two intents one key", () => {
  assert.notEqual(stableKey("payment", "a:b", "c"), stableKey("payment", "a", "b:c"));
  assert.notEqual(stableKey("pay/ment", "x", "t"), stableKey("pay", "ment/x", "t"));
  assert.notEqual(stableKey("payment", "100%3A", "t"), stableKey("payment", "100:", "t"));
});

test("a long business id keeps a readable prefix and fits the schema", () => {
  const longId = "x".repeat(300);
  const key = stableKey("payment", longId, "pay");
  assert.equal(key.length, MAX_KEY_LENGTH);
  assert.ok(key.startsWith("payment/xxx"));
  assert.equal(key, stableKey("payment", longId, "pay"));
  assert.notEqual(key, stableKey("payment", longId + "y", "pay"));
});

test("the long form matches the Python client's, byte for byte", () => {
  // The same pinned value as clients/python/tests/test_keys.py.
  const key = stableKey("payment", "é".repeat(300), "pay");
  assert.equal(Array.from(key).length, MAX_KEY_LENGTH);
  assert.equal(key, "payment/" + "é".repeat(182) + "~3ae18829a6863e08e2b8f0da7c0e3b0b63473d41259f1d79b50e1a60c50dc922");
});

test("attempt must be stated as a positive integer", () => {
  for (const bad of [0, -1, 1.5, NaN, "1" as unknown as number]) {
    assert.throws(() => stableKey("payment", "o", "pay", bad), TypeError, String(bad));
  }
});

test("blank parts are refused", () => {
  assert.throws(() => stableKey("payment", " ", "pay"), TypeError);
  assert.throws(() => stableKey("", "o", "pay"), TypeError);
});

test("compactKey keeps a stable key that fits SEPA as it is", () => {
  assert.equal(compactKey("payment", "order-42", "pay"), "payment/order-42:pay:1");
  assert.equal(compactKey("payment", "order-42", "pay", 2), stableKey("payment", "order-42", "pay", 2));
});

test("compactKey makes a longer or escaped key a readable start and a digest", () => {
  const uuidId = "3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b";
  const key = compactKey("payment", uuidId, "pay");
  assert.equal(key, compactKey("payment", uuidId, "pay"));
  assert.match(key, /^payment-3f2a9c\.[0-9a-f]{20}$/);
  assert.notEqual(key, compactKey("payment", uuidId, "pay", 2));
  const escaped = compactKey("payment", "a/b", "pay"); // '%' is outside SEPA's set
  assert.match(escaped, /^payment-a-2Fb\.[0-9a-f]{20}$/);
  assert.notEqual(escaped, compactKey("payment", "a-b", "pay"));
});

test("every compact key is a SEPA EndToEndId", () => {
  const cases = [["payment", "x".repeat(300), "pay"], ["支付", "é", "付"], ["p", "order 42", "t"], ["payment", "o", "pay"]];
  for (const [bizType, bizId, tool] of cases) {
    const key = compactKey(bizType, bizId, tool);
    assert.ok(Array.from(key).length <= COMPACT_KEY_LENGTH, `${bizType} ${bizId} ${tool}`);
    assert.equal(sepaEndToEndId(key), key);
  }
});

test("the compact digest form matches the Python client's, byte for byte", () => {
  // The same pinned value as clients/python/tests/test_keys.py.
  assert.equal(compactKey("payment", "é".repeat(300), "pay"), "payment-3ae188.54f5e47ef7b30f70ac90");
});

test("compactKey checks its parts as stableKey does", () => {
  assert.throws(() => compactKey("payment", " ", "pay"), TypeError);
  assert.throws(() => compactKey("payment", "o", "pay", 0), TypeError);
});

test("a tool call's key names the run, the step and the tool, the same as the Python client's", () => {
  assert.equal(toolCallKey("run 7/ä", 3, "charge"), "run:run%207%2F%C3%A4:3:charge");
  assert.equal(toolCallKey("r1", "turn-2.call-0", "charge"), "run:r1:turn-2.call-0:charge");
  assert.notEqual(toolCallKey("a:b", 1, "c"), toolCallKey("a", 1, "b:c"));
  assert.notEqual(toolCallKey("r1", 1, "charge"), toolCallKey("r1", 2, "charge"));
});

test("a long run id gives a key the proxy takes, still one per call", () => {
  const key = toolCallKey("x".repeat(400), 1, "charge");
  assert.equal(key.length, MAX_TOOL_CALL_KEY_LENGTH);
  assert.match(key, /^run:x+~[0-9a-f]{64}$/);
  assert.notEqual(key, toolCallKey("x".repeat(400), 2, "charge"));
  assert.equal(key, "run:" + "x".repeat(131) + "~" + key.slice(-64));
});

test("a tool call key refuses what is not a run, a step or a tool", () => {
  assert.throws(() => toolCallKey("", 1, "charge"), /runId must be a non-blank string/);
  assert.throws(() => toolCallKey("r", -1, "charge"), /step must be an integer >= 0/);
  assert.throws(() => toolCallKey("r", 1, " "), /tool must be a non-blank string/);
});

test("mcpMeta carries the key where the proxy reads it, and refuses what it would refuse", () => {
  assert.deepEqual(mcpMeta("run:r1:1:charge"), { "io.idemwatch/idempotencyKey": "run:r1:1:charge" });
  assert.equal(MCP_KEY_FIELD, "io.idemwatch/idempotencyKey");
  assert.throws(() => mcpMeta("é"), /printable ASCII/);
  assert.throws(() => mcpMeta("k".repeat(201)), /1 to 200/);
});
