// The seeds' fault test, driven from TypeScript: a proxy drops 20% of successful gateway responses,
// every layer retries (HTTP client, framework, model, the gateway's webhook), and charges : orders
// stays exactly 1 : 1. The reconciler then settles the unknown ones from the gateway's ledger.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Client } from "pg";

import { Guard, Protocol, ResponseTimeout, ToolCall, TriggerSource, stableKey } from "../src";
import { Gateway, adminQuery, ledger, payment, scalar, unique, writerClient } from "./support";

const ORDERS = 60;
const DROP_RATE = 0.2;
const RETRY_SOURCES: TriggerSource[] = ["http", "framework", "llm", "callback"];

// A seeded generator, so the dropped set is the same on every run.
function seeded(seed: number) {
  return () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
}

test("dropped responses and retries from every source keep charges to orders one to one", async () => {
  const run = unique("fault");
  const orders = Array.from({ length: ORDERS }, (_, i) => `${run}-${i}`);
  const random = seeded(20240607);
  const drop = new Map(orders.map((o) => [o, random() < DROP_RATE]));
  const gateway = new Gateway();
  const executions: string[] = [];
  const webhooks: Array<[string, string]> = [];

  const call = (order: string, triggerSource: TriggerSource): ToolCall =>
    payment(order, triggerSource, { traceId: `trace-${order}`, agentId: "fault-agent" });
  const body = (order: string) => async () => {
    executions.push(order);
    const answer = gateway.charge(order, 2990);
    webhooks.push([order, answer.gatewayRef]);
    if (drop.get(order)) throw new ResponseTimeout("proxy dropped the gateway's response");
    return answer;
  };

  // Four agent workers, each on its own connection, interleaving on the event loop.
  const clients = await Promise.all([0, 1, 2, 3].map(() => writerClient()));
  try {
    await Promise.all(
      clients.map(async (client, worker) => {
        const guard = new Guard(client);
        for (const order of orders.filter((_, i) => i % 4 === worker)) {
          let result = await guard.run(call(order, "initial"), body(order));
          for (const source of RETRY_SOURCES) {
            if (result.ok) break;
            // Every layer retries whatever failed: the guard is what keeps it safe.
            result = await guard.run(call(order, source), body(order));
          }
        }
      }),
    );

    const dropped = orders.filter((o) => drop.get(o));
    assert.ok(dropped.length > 0);
    assert.equal(executions.length, ORDERS);
    assert.deepEqual([...executions].sort(), [...orders].sort());

    // The gateway's webhooks, on its own login (idem_ledger): the ledger line, then the callback
    // re-drives the tool call.
    const gateway = new Client(ledger);
    await gateway.connect();
    try {
      const protocol = new Protocol(gateway);
      for (const [order, ref] of webhooks) {
        await protocol.recordFundFlow({
          bizType: "payment", bizId: order, kind: "DEBIT", amountMinor: 2990, currency: "CNY",
          externalRef: ref, idempotencyKey: stableKey("payment", order, "pay"),
        });
      }
    } finally {
      await gateway.end();
    }
    assert.equal(
      await scalar("SELECT count(*)::int FROM idem.records WHERE biz_id LIKE $1 AND status = 'UNKNOWN'", [`${run}-%`]),
      dropped.length,
    );
    await scalar("SELECT idem.reconcile()"); // as the superuser here; idem_reconciler in production

    const redriver = new Guard(clients[1]);
    for (const order of orders) {
      const result = await redriver.run(call(order, "callback"), body(order));
      assert.equal(result.error, null, order);
      assert.equal(result.executed, false);
    }
  } finally {
    await Promise.all(clients.map((c) => c.end()));
  }

  for (const order of orders) assert.equal(gateway.count(order), 1, order);
  assert.equal(executions.length, ORDERS);
  assert.equal(
    await scalar("SELECT count(*)::int FROM idem.records WHERE biz_id LIKE $1 AND status = 'SUCCESS'", [`${run}-%`]),
    ORDERS,
  );
  assert.deepEqual(
    await adminQuery(
      "SELECT count(*)::int AS flows, count(duplicate_of)::int AS duplicates FROM idem.fund_flows WHERE biz_id LIKE $1 AND kind = 'DEBIT'",
      [`${run}-%`],
    ),
    [{ flows: ORDERS, duplicates: 0 }],
  );
  const sources = await adminQuery("SELECT DISTINCT trigger_source FROM idem.attempts WHERE biz_id LIKE $1 ORDER BY 1", [`${run}-%`]);
  assert.deepEqual(sources.map((r) => r.trigger_source), ["callback", "framework", "http", "initial", "llm"]);
  assert.equal(
    await scalar("SELECT count(*)::int FROM idem.attempts WHERE biz_id LIKE $1 AND outcome = 'executed'", [`${run}-%`]),
    ORDERS,
  );
});
