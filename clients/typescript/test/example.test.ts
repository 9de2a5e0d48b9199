// The example agent loop runs: one charge, every retry stopped, the callback replayed.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Pool } from "pg";

import { main } from "../examples/agent_loop";
import { adminQuery, superuser, unique, writerPool } from "./support";

test("the agent loop example charges once through every retry", async () => {
  const writer = writerPool();
  const reconciler = new Pool({ ...superuser, max: 1 });
  const order = unique("coffee");
  try {
    const outcome = await main({ writer, reconciler, orderId: order, log: () => {} });
    assert.equal(outcome.charges, 1);
    assert.notEqual(outcome.replayed, null);
    const results = outcome.messages.filter((m) => m.role === "tool").map((m) => String(m.content));
    assert.equal(results.length, 2); // the first call, then the model's own retry
    for (const r of results) assert.match(r, /Do not retry/);
  } finally {
    await writer.end();
    await reconciler.end();
  }
  const rows = await adminQuery("SELECT trigger_source, outcome FROM idem.attempts WHERE biz_id = $1 ORDER BY id", [order]);
  assert.deepEqual(rows, [
    { trigger_source: "initial", outcome: "executed" }, // the response is lost: UNKNOWN
    { trigger_source: "framework", outcome: "in_progress" }, // the framework's retry policy
    { trigger_source: "llm", outcome: "in_progress" }, // the model asks again
    { trigger_source: "framework", outcome: "in_progress" },
    { trigger_source: "callback", outcome: "replayed" }, // the webhook's re-drive, after reconciliation
  ]);
});
