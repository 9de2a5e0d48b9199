// ingestCallback against a real PostgreSQL: the gateway's webhook, on a login holding only
// idem_ledger, decides an UNKNOWN record by the key the client gave the gateway.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Client } from "pg";

import { CallbackEvent, CallbackResult, Protocol, ingestCallback, stableKey, stripeMetadata } from "../src";
import { ledger, scalar, unique, writerClient } from "./support";

const statusOf = (key: string) => scalar("SELECT status FROM idem.records WHERE idempotency_key = $1", [key]);
const flowsOf = (order: string) => scalar("SELECT count(*)::int FROM idem.fund_flows WHERE biz_id = $1", [order]);
const eventsWith = (eventId: string) => scalar("SELECT count(*)::int FROM idem.gateway_events WHERE event_id = $1", [eventId]);

async function ledgerClient(): Promise<Client> {
  const client = new Client(ledger);
  await client.connect();
  return client;
}

/**
 * A payment whose outcome is lost: claimed and marked UNKNOWN through the client, as the guard does
 * when the gateway does not answer. Its key. The request carries amount_minor and currency, the
 * names the database compares the gateway's amount with.
 */
async function unknownPayment(order: string, amountMinor = 2990): Promise<string> {
  const key = stableKey("payment", order, "pay");
  const client = await writerClient();
  try {
    const protocol = new Protocol(client);
    const payload = { order_id: order, amount_minor: amountMinor, currency: "EUR" };
    const begun = await protocol.begin({ key, bizType: "payment", bizId: order, tool: "pay", triggerSource: "initial", payload });
    const marked = await protocol.markUnknown(key, begun.version as number, "TimeoutError: no answer in 5s", begun.claimToken);
    assert.equal(marked.result, "ok");
  } finally {
    await client.end();
  }
  assert.equal(await statusOf(key), "UNKNOWN");
  return key;
}

/** Stripe's charge.succeeded for the charge, naming the key it was given in metadata. */
function chargeSucceeded(key: string, eventId: string, charge: string, amountMinor = 2990): CallbackEvent {
  const event = { id: eventId, type: "charge.succeeded", data: { object: { id: charge, metadata: stripeMetadata(key) } } };
  return {
    gateway: "stripe",
    eventId,
    kind: "DEBIT",
    amountMinor,
    currency: "EUR",
    gatewayRef: charge,
    idempotencyKey: event.data.object.metadata.idempotency_key,
    payload: event,
  };
}

describe("ingestCallback", () => {
  let client: Client;
  before(async () => {
    client = await ledgerClient();
  });
  after(async () => {
    await client.end();
  });

  test("a callback naming the key resolves an unknown record SUCCESS", async () => {
    const order = unique("cb");
    const key = await unknownPayment(order);
    const got = await ingestCallback(client, chargeSucceeded(key, unique("evt"), unique("ch")));
    assert.equal(got.result, "matched");
    assert.equal(got.recordKey, key);
    assert.match(got.flowId ?? "", /^[0-9]+$/);
    assert.equal(got.recordStatus, "SUCCESS");
    assert.equal(got.alreadyReceived, false);
    assert.equal(await statusOf(key), "SUCCESS");
    assert.equal(await flowsOf(order), 1);
    assert.equal(await scalar("SELECT recorded_by FROM idem.fund_flows WHERE id = $1", [got.flowId]), "ledger");
  });

  test("a re-delivery returns the same answer and records no second flow", async () => {
    const order = unique("redelivered");
    const key = await unknownPayment(order);
    const event = chargeSucceeded(key, unique("evt"), unique("ch"));
    const first = await ingestCallback(client, event);
    const again = await new Protocol(client).ingestCallback(event);
    assert.equal(again.alreadyReceived, true);
    assert.deepEqual({ ...again, alreadyReceived: false }, first);
    assert.equal(await flowsOf(order), 1);
    assert.equal(await eventsWith(event.eventId), 1);
  });

  test("a callback with another amount is mismatched and leaves the record UNKNOWN", async () => {
    const order = unique("other-amount");
    const key = await unknownPayment(order, 2990);
    const got = await ingestCallback(client, chargeSucceeded(key, unique("evt"), unique("ch"), 2999));
    assert.equal(got.result, "mismatched");
    assert.equal(got.recordKey, key);
    assert.equal(got.flowId, null);
    assert.equal(got.recordStatus, "UNKNOWN");
    assert.equal(await statusOf(key), "UNKNOWN");
    assert.equal(await flowsOf(order), 0);
  });

  test("two concurrent deliveries of one event on separate connections record one event and one flow", async () => {
    const order = unique("concurrent");
    const key = await unknownPayment(order);
    const event = chargeSucceeded(key, unique("evt"), unique("ch"));
    const clients = await Promise.all([ledgerClient(), ledgerClient()]);
    let results: CallbackResult[];
    try {
      results = await Promise.all(clients.map((c) => ingestCallback(c, event)));
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
    assert.deepEqual(results.map((r) => r.alreadyReceived).sort(), [false, true]);
    for (const r of results) {
      assert.equal(r.result, "matched");
      assert.equal(r.recordStatus, "SUCCESS");
    }
    assert.equal(results[0].flowId, results[1].flowId);
    assert.equal(await eventsWith(event.eventId), 1);
    assert.equal(await flowsOf(order), 1);
    assert.equal(await statusOf(key), "SUCCESS");
  });

  test("the event is checked before anything is sent", async () => {
    const good: CallbackEvent = { gateway: "stripe", eventId: "evt-ts-x", kind: "DEBIT", amountMinor: 100, currency: "EUR", gatewayRef: "ch-x" };
    const cases: Array<[Partial<Record<keyof CallbackEvent, unknown>>, string]> = [
      [{ kind: "debit" }, "fund flow kind (DEBIT, CREDIT, REFUND, FREEZE, UNFREEZE, CAPTURE)"],
      [{ kind: "PAYOUT" }, "fund flow kind"],
      [{ amountMinor: -1 }, "amountMinor must be an integer"],
      [{ amountMinor: 29.9 }, "amountMinor must be an integer"],
      [{ amountMinor: "2990" }, "amountMinor must be an integer"],
      [{ amountMinor: 10n ** 15n }, "amountMinor must be an integer"],
      [{ currency: "eur" }, "three capital letters"],
      [{ currency: "EURO" }, "three capital letters"],
      [{ currency: null }, "three capital letters"],
      [{ gateway: "stripe live" }, "gateway must be"],
      [{ eventId: " " }, "eventId"],
      [{ gatewayRef: undefined }, "gatewayRef"],
      [{ idempotencyKey: "" }, "idempotencyKey"],
      [{ bizId: "x".repeat(256) }, "bizId must be a non-blank string of at most 255 characters, or null, got 256 characters"],
    ];
    for (const [change, message] of cases) {
      await assert.rejects(
        ingestCallback(client, { ...good, ...change } as CallbackEvent),
        (err: Error) => err instanceof TypeError && err.message.includes(message),
        JSON.stringify(change, (_, v) => (typeof v === "bigint" ? `${v}n` : v)),
      );
    }
    assert.equal(await eventsWith("evt-ts-x"), 0);
    // A bigint amount within the bounds is taken as it is.
    assert.equal((await ingestCallback(client, { ...good, eventId: unique("evt"), amountMinor: 100n, idempotencyKey: unique("k") })).result, "unmatched");
  });

  test("the writer role cannot speak for the gateway", async () => {
    const writer = await writerClient();
    try {
      await assert.rejects(
        ingestCallback(writer, { gateway: "stripe", eventId: unique("evt"), kind: "DEBIT", amountMinor: 1, currency: "EUR", gatewayRef: unique("ch"), idempotencyKey: "k" }),
        (err: { code?: string }) => err.code === "42501",
      );
    } finally {
      await writer.end();
    }
  });
});
