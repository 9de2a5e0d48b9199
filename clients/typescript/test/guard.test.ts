// The guard against a real PostgreSQL: each test names the behaviour it pins down.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, test } from "node:test";

import { Client } from "pg";

import {
  BusinessFailure,
  DoNotRetry,
  FinalFailure,
  Guard,
  InProgress,
  MayRetry,
  NotRecorded,
  OutcomeUnknown,
  PayloadMismatch,
  Protocol,
  Refused,
  Rejected,
  Retired,
  RetryableFailure,
  Unavailable,
  stableKey,
  withCallContext,
} from "../src";
import { Gateway, adminQuery, guardedPool, payment, scalar, sleep, superuser, unique, writerClient } from "./support";

// A lease a body outlives, long enough that the claim's own answer comes back within it (or the
// claim would be given back unused).
const SHORT_LEASE_MS = 500;

const statusOf = (key: string) => scalar("SELECT status FROM idem.records WHERE idempotency_key = $1", [key]);

describe("Guard", () => {
  const { pool, guard } = guardedPool();

  test("executed then replayed returns the stored response without running again", async () => {
    const order = unique("o");
    const gateway = new Gateway();
    const first = await guard.run(payment(order), () => gateway.charge(order, 2990));
    assert.equal(first.error, null);
    assert.equal(first.executed, true);
    assert.equal(first.outcome, "executed");
    const again = await guard.run(payment(order, "llm"), () => gateway.charge(order, 2990));
    assert.equal(again.outcome, "replayed");
    assert.equal(again.executed, false);
    assert.deepEqual(again.unwrap(), first.response);
    assert.equal(gateway.count(order), 1);
    assert.equal(await statusOf(first.key), "SUCCESS");
  });

  test("trigger source, trace id and agent id are stored in attempts", async () => {
    const order = unique("o");
    const gateway = new Gateway();
    await guard.run(payment(order, "initial", { traceId: "t-initial", agentId: "agent-1" }), () => gateway.charge(order, 1));
    for (const source of ["llm", "framework", "http", "callback"] as const) {
      await guard.run(payment(order, source, { traceId: `t-${source}`, agentId: "agent-2" }), () => gateway.charge(order, 1));
    }
    const rows = await adminQuery(
      "SELECT trigger_source, outcome, trace_id, agent_id FROM idem.attempts WHERE idempotency_key = $1 ORDER BY id",
      [stableKey("payment", order, "pay")],
    );
    assert.deepEqual(rows, [
      { trigger_source: "initial", outcome: "executed", trace_id: "t-initial", agent_id: "agent-1" },
      ...["llm", "framework", "http", "callback"].map((s) => ({ trigger_source: s, outcome: "replayed", trace_id: `t-${s}`, agent_id: "agent-2" })),
    ]);
  });

  test("twenty concurrent callers with one key on separate connections run the side effect once", async () => {
    const order = unique("race");
    const gateway = new Gateway();
    const clients = await Promise.all(Array.from({ length: 20 }, () => writerClient()));
    let ran = 0;
    try {
      const results = await Promise.all(
        clients.map((client, i) =>
          new Guard(client).run(payment(order, i ? "framework" : "initial"), async () => {
            ran++;
            await sleep(300); // the others arrive while it is PROCESSING
            return gateway.charge(order, 2990);
          }),
        ),
      );
      assert.equal(ran, 1);
      assert.equal(gateway.count(order), 1);
      assert.equal(results.filter((r) => r.executed).length, 1);
      // The race did happen: some callers came while the first was still PROCESSING.
      assert.ok(results.some((r) => r.outcome === "in_progress"));
      for (const r of results.filter((r) => !r.executed)) {
        if (r.outcome === "in_progress") assert.ok(r.error instanceof InProgress);
        else {
          assert.equal(r.outcome, "replayed");
          assert.equal(r.ok, true);
        }
      }
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
    const key = stableKey("payment", order, "pay");
    assert.equal(await scalar("SELECT count(*)::int FROM idem.attempts WHERE idempotency_key = $1", [key]), 20);
    assert.equal(await scalar("SELECT count(*)::int FROM idem.attempts WHERE idempotency_key = $1 AND outcome = 'executed'", [key]), 1);
  });

  test("a response timeout marks unknown and the retry does not execute", async () => {
    const order = unique("timeout");
    const gateway = new Gateway();
    let calls = 0;
    const body = async (signal: AbortSignal) => {
      calls++;
      gateway.charge(order, 2990); // the gateway charged; its answer never comes
      // As fetch does: the request is abandoned when the signal aborts.
      await new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason)));
      return { never: true };
    };
    const first = await guard.run(payment(order, "initial", { timeoutMs: 50 }), body);
    assert.ok(first.error instanceof OutcomeUnknown);
    assert.ok(first.error instanceof DoNotRetry);
    assert.match(first.error.forModel(), /Do not retry/);
    assert.equal(await statusOf(first.key), "UNKNOWN");
    for (const source of ["http", "llm", "framework"] as const) {
      const retry = await guard.run(payment(order, source, { timeoutMs: 50 }), body);
      assert.ok(retry.error instanceof InProgress);
      assert.equal(retry.error.status, "UNKNOWN");
      assert.match(retry.error.message, /uncertain/);
    }
    assert.equal(calls, 1);
    assert.equal(gateway.count(order), 1);
    assert.equal(await scalar("SELECT last_error FROM idem.records WHERE idempotency_key = $1", [first.key]), "ResponseTimeout: no answer within 50 ms");
  });

  test("an answer that comes after the deadline settles the unknown record, and the retry is replayed", async () => {
    const order = unique("late-answer");
    const gateway = new Gateway();
    let calls = 0;
    const body = async () => {
      calls++;
      await sleep(150); // ignores its signal: the answer comes, late
      return gateway.charge(order, 2990);
    };
    const first = await guard.run(payment(order, "initial", { timeoutMs: 30 }), body);
    assert.ok(first.error instanceof OutcomeUnknown);
    assert.equal(await statusOf(first.key), "UNKNOWN");
    await guard.idle();
    assert.equal(await statusOf(first.key), "SUCCESS");
    const retry = await guard.run(payment(order, "llm"), body);
    assert.equal(retry.outcome, "replayed");
    assert.deepEqual(retry.response, { gatewayRef: gateway.charges.get(order)![0], amountMinor: 2990 });
    assert.equal(calls, 1);
  });

  test("a failure that comes after the deadline leaves the record unknown", async () => {
    const order = unique("late-failure");
    const first = await guard.run(payment(order, "initial", { timeoutMs: 30 }), async () => {
      await sleep(100);
      throw new BusinessFailure("declined, but too late to know");
    });
    assert.ok(first.error instanceof OutcomeUnknown);
    await guard.idle();
    assert.equal(await statusOf(first.key), "UNKNOWN");
  });

  test("any unclassified error is unknown, not a failure", async () => {
    const result = await guard.run(payment(unique("boom")), () => {
      throw new Error("socket hang up");
    });
    assert.ok(result.error instanceof OutcomeUnknown);
    assert.ok((result.error.cause as Error).message === "socket hang up");
    assert.equal(await statusOf(result.key), "UNKNOWN");
  });

  test("a final failure is handed back to the retry instead of running again", async () => {
    const order = unique("declined");
    let calls = 0;
    const body = () => {
      calls++;
      throw new BusinessFailure("card declined: insufficient balance");
    };
    const first = await guard.run(payment(order), body);
    assert.ok(first.error instanceof FinalFailure);
    assert.equal(first.error.replayed, false);
    assert.equal(await statusOf(first.key), "FAILED");
    assert.equal(await scalar("SELECT retry_allowed FROM idem.records WHERE idempotency_key = $1", [first.key]), false);
    const retry = await guard.run(payment(order, "llm"), body);
    assert.equal(retry.outcome, "replayed");
    assert.ok(retry.error instanceof FinalFailure);
    assert.equal(retry.error.replayed, true);
    assert.match(retry.error.error, /card declined: insufficient balance/);
    assert.match(retry.error.forModel(), /change the plan/);
    assert.throws(() => retry.unwrap(), FinalFailure);
    assert.equal(calls, 1);
  });

  test("a request that never left may run again with the same key", async () => {
    const order = unique("refused");
    const gateway = new Gateway();
    let attempts = 0;
    const body = () => {
      attempts++;
      if (attempts === 1) throw Object.assign(new Error("connect ECONNREFUSED 10.0.0.1:443"), { code: "ECONNREFUSED" });
      return gateway.charge(order, 2990);
    };
    const first = await guard.run(payment(order), body);
    assert.ok(first.error instanceof RetryableFailure);
    assert.ok(first.error instanceof MayRetry);
    assert.equal(await scalar("SELECT retry_allowed FROM idem.records WHERE idempotency_key = $1", [first.key]), true);
    const retry = await guard.run(payment(order, "framework"), body);
    assert.equal(retry.error, null);
    assert.equal(retry.executed, true);
    assert.equal(attempts, 2);
    assert.equal(gateway.count(order), 1);
    assert.equal(await statusOf(first.key), "SUCCESS");
  });

  test("a classifier names what the default would call unknown", async () => {
    const classified = new Guard(pool, {
      classify: (err) => ((err as Error).cause as { code?: string } | undefined)?.code === "ECONNREFUSED" ? "not_sent" : undefined,
    });
    const sent = await classified.run(payment(unique("classified")), () => {
      throw new TypeError("fetch failed", { cause: { code: "ECONNREFUSED" } });
    });
    const other = await classified.run(payment(unique("classified")), () => {
      throw new TypeError("fetch failed", { cause: { code: "UND_ERR_SOCKET" } });
    });
    assert.ok(sent.error instanceof RetryableFailure);
    assert.equal(await scalar("SELECT retry_allowed FROM idem.records WHERE idempotency_key = $1", [sent.key]), true);
    assert.ok(other.error instanceof OutcomeUnknown); // undefined: the default decides
  });

  test("the claim token stays with the wrapper so another instance cannot report", async () => {
    const order = unique("token");
    const key = stableKey("payment", order, "pay");
    const gateway = new Gateway();
    const otherClient = await writerClient();
    const other = new Guard(otherClient);
    const seen: Record<string, any> = {};
    try {
      const result = await guard.run(payment(order), async () => {
        seen.second = await other.run(payment(order, "callback"), () => gateway.charge(order, 2990));
        const protocol = new Protocol(otherClient);
        seen.noToken = await protocol.complete(key, 1, { forged: true }, null);
        seen.wrongToken = await protocol.complete(key, 1, { forged: true }, randomUUID());
        seen.fail = await protocol.fail(key, 1, "forged", randomUUID());
        seen.unknown = await protocol.markUnknown(key, 1, "forged", null);
        return gateway.charge(order, 2990);
      });
      assert.equal(result.error, null);
      assert.ok(seen.second.error instanceof InProgress);
      for (const name of ["noToken", "wrongToken", "fail", "unknown"]) assert.equal(seen[name].result, "not_claimant", name);
      assert.deepEqual(await scalar("SELECT response_payload FROM idem.records WHERE idempotency_key = $1", [key]), result.response);
      assert.equal(gateway.count(order), 1);
    } finally {
      await otherClient.end();
    }
  });

  test("a late answer after the lease ran out is recorded, not rerun", async () => {
    const order = unique("late");
    const gateway = new Gateway();
    let calls = 0;
    const result = await guard.run(payment(order, "initial", { leaseMs: SHORT_LEASE_MS }), async () => {
      calls++;
      await sleep(SHORT_LEASE_MS + 50);
      // The sweeper runs while downstream is slow: PROCESSING past its lease -> UNKNOWN.
      assert.ok((await scalar("SELECT idem.expire_leases()")) >= 1);
      return gateway.charge(order, 2990);
    });
    assert.equal(result.error, null);
    assert.equal(await statusOf(result.key), "SUCCESS");
    assert.equal(calls, 1);
  });

  test("a claim acknowledged after its lease ran out is given back and never run", async () => {
    const order = unique("late-claim");
    const gateway = new Gateway();
    const call = payment(order, "initial", { leaseMs: SHORT_LEASE_MS });
    let calls = 0;
    const body = async () => {
      calls++;
      return gateway.charge(order, 2990);
    };
    // Another transaction holds the key uncommitted: the claim waits inside its insert, after its
    // lease started, as a commit waits for a synchronous standby that is not there.
    const holder = new Client(superuser);
    await holder.connect();
    let result;
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT idem.begin($1, 'payment', 'held', 'pay', NULL, 'initial', '{}')", [call.key]);
      const { rows } = await holder.query("SELECT pg_backend_pid() AS pid");
      const running = guard.run(call, body);
      const deadline = Date.now() + 30_000;
      while (!(await scalar("SELECT count(*)::int FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", [rows[0].pid]))) {
        assert.ok(Date.now() < deadline, "no claim waited behind the held key");
        await sleep(20);
      }
      await sleep(SHORT_LEASE_MS + 100);
      await holder.query("ROLLBACK");
      result = await running;
    } finally {
      await holder.end();
    }
    assert.ok(result.error instanceof RetryableFailure, String(result.error));
    assert.match(result.error.message, /past its 0.5s lease/);
    assert.equal(result.executed, false);
    assert.equal(calls, 0);
    assert.equal(gateway.count(order), 0);
    assert.equal(await statusOf(call.key), "FAILED");
    // Given back by its own claimant, the key runs on the retry, once.
    const again = await guard.run(payment(order, "framework", { leaseMs: SHORT_LEASE_MS }), body);
    assert.equal(again.error, null);
    assert.equal(calls, 1);
    assert.equal(gateway.count(order), 1);
  });

  test("a report the layer refuses is not recorded and never rerun", async () => {
    const order = unique("settled");
    const call = payment(order, "initial", { leaseMs: SHORT_LEASE_MS });
    let calls = 0;
    const result = await guard.run(call, async () => {
      calls++;
      await sleep(SHORT_LEASE_MS + 50);
      await scalar("SELECT idem.expire_leases()");
      // A person decided meanwhile that it did not happen.
      assert.equal(await scalar("SELECT result FROM idem.settle($1, 2, 'FAILED', 'gateway shows no charge')", [call.key]), "ok");
      return { gatewayRef: "gw-late" };
    });
    assert.ok(result.error instanceof NotRecorded);
    assert.deepEqual(result.error.response, { gatewayRef: "gw-late" });
    assert.equal(result.error.report?.result, "conflict");
    assert.equal(await statusOf(call.key), "FAILED");
    assert.equal(calls, 1);
  });

  test("a response that cannot be stored is not recorded and never rerun", async () => {
    const order = unique("unstorable");
    let calls = 0;
    const body = () => {
      calls++;
      const answer: Record<string, unknown> = { gatewayRef: "gw-x" };
      answer.self = answer; // not JSON
      return answer;
    };
    const result = await guard.run(payment(order), body);
    assert.ok(result.error instanceof NotRecorded);
    assert.equal((result.error.response as Record<string, unknown>).gatewayRef, "gw-x");
    const retry = await guard.run(payment(order, "llm"), body);
    assert.ok(retry.error instanceof InProgress);
    assert.equal(calls, 1);
  });

  // After a paid call, a second one the layer refuses before anything runs: the same key with another
  // request, or a new key for the same business object.
  const refusals = [
    { name: "same key with a different request is a payload mismatch", prefix: "mismatch", outcome: "payload_mismatch",
      error: PayloadMismatch, second: (order: string) => payment(order, "llm", { amount: 9990 }) },
    { name: "a new key for a paid business object is rejected", prefix: "paid", outcome: "rejected",
      error: Rejected, second: (order: string) => payment(order, "initial", { attempt: 2 }) },
  ];
  for (const { name, prefix, outcome, error, second } of refusals) {
    test(name, async () => {
      const order = unique(prefix);
      const gateway = new Gateway();
      assert.equal((await guard.run(payment(order), () => gateway.charge(order, 1))).ok, true);
      const refused = await guard.run(second(order), () => gateway.charge(order, 1));
      assert.equal(refused.outcome, outcome);
      assert.ok(refused.error instanceof error);
      assert.ok(refused.error instanceof Refused);
      assert.equal(gateway.count(order), 1);
    });
  }

  test("a retired key never runs again", async () => {
    const order = unique("retired");
    const call = payment(order);
    await adminQuery(
      "INSERT INTO idem.retired_keys (idempotency_key, biz_type, biz_id, request_hash, status) " +
        "VALUES ($1, 'payment', $2, encode(sha256(convert_to($3::jsonb::text, 'UTF8')), 'hex'), 'SUCCESS')",
      [call.key, order, JSON.stringify(call.payload)],
    );
    let ran = 0;
    const result = await guard.run(call, () => ran++);
    assert.equal(result.outcome, "retired");
    assert.ok(result.error instanceof Retired);
    assert.equal(ran, 0);
  });

  test("an unreachable database means nothing ran and the call may be retried", async () => {
    const { Pool } = await import("pg");
    const down = new Pool({ host: "127.0.0.1", port: 1, connectionTimeoutMillis: 1000 });
    let ran = 0;
    try {
      const result = await new Guard(down, { resendPausesMs: [50, 50] }).run(payment(unique("down")), () => ran++);
      assert.ok(result.error instanceof Unavailable);
      assert.ok(result.error instanceof MayRetry);
      assert.equal(ran, 0);
    } finally {
      await down.end();
    }
  });

  test("a refusal by the schema's bounds is thrown as it is, before anything ran", async () => {
    let ran = 0;
    const call = { ...payment(unique("bounds")), bizType: "not a label!" };
    await assert.rejects(guard.run(call, () => ran++), (err: any) => err.code === "22023");
    assert.equal(ran, 0);
  });

  test("an error that is not the connection's reaches the caller as it is, before anything ran", async () => {
    let ran = 0;
    const broken = new Guard({ query: async () => { throw new TypeError("a bug in the caller's driver shim"); } });
    await assert.rejects(broken.run(payment(unique("shim")), () => ran++), TypeError);
    const dropped = new Guard({ query: async () => { throw new Error("Connection terminated unexpectedly"); } }, { resendPausesMs: [] });
    assert.ok((await dropped.run(payment(unique("shim")), () => ran++)).error instanceof Unavailable);
    assert.equal(ran, 0);
  });

  test("the writer role has protocol rights only", async () => {
    await assert.rejects(pool.query("SELECT count(*) FROM idem.records"), (err: any) => err.code === "42501");
  });
});

describe("guard.tool", () => {
  const { guard } = guardedPool();

  test("the wrapped tool keys by business object and reads the stated context", async () => {
    const gateway = new Gateway();
    const pay = guard.tool(
      { bizType: "payment", bizId: "orderId", tool: "pay", payload: (a) => ({ orderId: a.orderId, amountMinor: a.amountMinor }) },
      async (args: { orderId: string; amountMinor: number; note?: string }) => gateway.charge(args.orderId, args.amountMinor),
    );
    const order = unique("deco");
    const first = await withCallContext({ triggerSource: "initial", traceId: "run-7", agentId: "shopper" }, () =>
      pay({ orderId: order, amountMinor: 2990, note: "first try" }),
    );
    // The model re-issued the call with a different free-text note: same intent, same key.
    const again = await withCallContext({ triggerSource: "llm", traceId: "run-7", agentId: "shopper" }, () =>
      pay({ orderId: order, amountMinor: 2990, note: "retrying because it looked slow" }),
    );
    assert.deepEqual(again, first);
    assert.equal(gateway.count(order), 1);
    const rows = await adminQuery(
      "SELECT trigger_source, outcome, trace_id, agent_id, tool, biz_id FROM idem.attempts WHERE idempotency_key = $1 ORDER BY id",
      [stableKey("payment", order, "pay")],
    );
    assert.deepEqual(rows, [
      { trigger_source: "initial", outcome: "executed", trace_id: "run-7", agent_id: "shopper", tool: "pay", biz_id: order },
      { trigger_source: "llm", outcome: "replayed", trace_id: "run-7", agent_id: "shopper", tool: "pay", biz_id: order },
    ]);
  });

  test("the wrapped tool rejects with do-not-retry errors", async () => {
    const declined = guard.tool({ bizType: "payment", bizId: "orderId", tool: "pay" }, async (_args: { orderId: string }) => {
      throw new BusinessFailure("insufficient balance");
    });
    const order = unique("deco-fail");
    await assert.rejects(declined({ orderId: order }), FinalFailure);
    await assert.rejects(declined({ orderId: order }, { triggerSource: "llm" }), (err: any) => err instanceof FinalFailure && err.replayed);
  });
});
