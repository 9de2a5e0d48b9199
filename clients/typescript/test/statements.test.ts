// A claim's calls prepared once a connection where the session is the connection's own, and sent
// unnamed through PgBouncer in transaction mode, where server connections are shared: every call
// runs once, as itself, either way.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Client, Pool } from "pg";

import { BEGIN_SQL, COMPLETE_SQL, Guard, Protocol, preparedName, preparedStatementLost } from "../src";
import type { Queryable } from "../src";
import { payment, pooledWriter, scalar, unique, writer, writerClient } from "./support";

const CLAIMS_EACH = 12;

async function claimAndComplete(protocol: Protocol, order: string): Promise<void> {
  const key = `key-${order}`;
  const begun = await protocol.begin({
    key,
    bizType: "payment",
    bizId: order,
    tool: "pay",
    triggerSource: "initial",
    payload: { orderId: order, amountMinor: 100 },
  });
  assert.equal(begun.outcome, "executed", `${order}: ${JSON.stringify(begun)}`);
  const done = await protocol.complete(key, begun.version!, { ok: true }, begun.claimToken);
  assert.equal(done.result, "ok", `${order}: ${JSON.stringify(done)}`);
}

async function preparedHere(db: Queryable): Promise<string[]> {
  const { rows } = await db.query("SELECT name FROM pg_prepared_statements ORDER BY name");
  return rows.map((row) => row.name as string);
}

async function countWhere(sql: string, prefix: string): Promise<number> {
  return Number(await scalar(sql, [`${prefix}-%`]));
}

describe("a connection of its own", () => {
  test("prepares a claim's calls once and uses them for every claim", async () => {
    const client = await writerClient();
    try {
      const prefix = unique("prepared");
      const protocol = new Protocol(client);
      for (let n = 0; n < CLAIMS_EACH; n++) await claimAndComplete(protocol, `${prefix}-${n}`);
      assert.deepEqual(await preparedHere(client), [preparedName("begin", BEGIN_SQL), preparedName("complete", COMPLETE_SQL)].sort());
      // The server ran the prepared statements, not unnamed ones: their call counts say so.
      const { rows } = await client.query("SELECT name, generic_plans + custom_plans AS runs FROM pg_prepared_statements");
      for (const row of rows) assert.equal(Number(row.runs), CLAIMS_EACH, `${row.name} ran ${row.runs} times`);
    } finally {
      await client.end();
    }
  });

  test("a pool prepares on each of its connections", async () => {
    const pool = new Pool({ ...writer, max: 3 });
    try {
      const prefix = unique("pool-prepared");
      const protocol = new Protocol(pool);
      await Promise.all(Array.from({ length: 6 }, (_, n) => claimAndComplete(protocol, `${prefix}-${n}`)));
      // Every connection the pool opened, all idle now: each holds the statements it ran.
      const opened = pool.totalCount;
      assert.ok(opened > 1, `six concurrent claims opened ${opened} connection(s)`);
      const clients = await Promise.all(Array.from({ length: opened }, () => pool.connect()));
      try {
        for (const client of clients) {
          assert.ok((await preparedHere(client)).some((name) => name.startsWith("idem_begin_")));
        }
      } finally {
        for (const client of clients) client.release();
      }
      assert.equal(await countWhere("SELECT count(*) FROM idem.records WHERE biz_id LIKE $1 AND status = 'SUCCESS'", prefix), 6);
    } finally {
      await pool.end();
    }
  });

  test("statements: unnamed prepares nothing", async () => {
    const client = await writerClient();
    try {
      const prefix = unique("unnamed");
      const guard = new Guard(client, { statements: "unnamed" });
      for (let n = 0; n < 3; n++) await claimAndComplete(guard.protocol, `${prefix}-${n}`);
      assert.deepEqual(await preparedHere(client), []);
    } finally {
      await client.end();
    }
    assert.throws(() => new Protocol(new Client(writer), { statements: "named" as never }), /statements must be "prepared" or "unnamed", got "named"/);
  });

  test("a statement the session lost runs the call once, unnamed", async () => {
    const client = await writerClient();
    try {
      const prefix = unique("lost");
      const protocol = new Protocol(client);
      await claimAndComplete(protocol, `${prefix}-0`);
      // Something else dropped the session's statements (DISCARD ALL, a pooler's reset).
      await client.query("DEALLOCATE ALL");
      await claimAndComplete(protocol, `${prefix}-1`);
      await claimAndComplete(protocol, `${prefix}-2`);
      assert.deepEqual(await preparedHere(client), [], "nothing is prepared again on a session that lost its statements");
      assert.equal(await countWhere("SELECT count(*) FROM idem.attempts WHERE biz_id LIKE $1", prefix), 3);
      assert.equal(await countWhere("SELECT count(*) FROM idem.records WHERE biz_id LIKE $1 AND status = 'SUCCESS'", prefix), 3);
    } finally {
      await client.end();
    }
  });

  test("a client not connected yet prepares once it is", async () => {
    const client = new Client(writer);
    const connecting = client.connect();
    try {
      const prefix = unique("connecting");
      const protocol = new Protocol(client);
      // Sent before the connection is up: pg queues it.
      await claimAndComplete(protocol, `${prefix}-0`);
      await connecting;
      for (let n = 1; n <= CLAIMS_EACH; n++) await claimAndComplete(protocol, `${prefix}-${n}`);
      assert.deepEqual(await preparedHere(client), [preparedName("begin", BEGIN_SQL), preparedName("complete", COMPLETE_SQL)].sort());
    } finally {
      await connecting.catch(() => undefined);
      await client.end();
    }
  });

  test("a lost statement is known by the server's own answers", async () => {
    const client = await writerClient();
    try {
      const lost = await client.query("EXECUTE idem_no_such_statement").catch((err) => err);
      assert.equal(lost.code, "26000");
      assert.ok(preparedStatementLost(lost));
      await client.query("PREPARE idem_held AS SELECT 1");
      const held = await client.query("PREPARE idem_held AS SELECT 2").catch((err) => err);
      assert.equal(held.code, "42P05");
      assert.ok(preparedStatementLost(held));
      const other = await client.query("SELECT 1/0").catch((err) => err);
      assert.ok(!preparedStatementLost(other));
      assert.ok(!preparedStatementLost({ code: "0A000", message: "something else not supported" }));
      // A plan that no longer fits its statement's result, drawn from the server; the routine
      // names it in a server whose messages are not in English.
      await client.query("CREATE TEMP TABLE idem_shape (v integer)");
      await client.query({ name: "idem_shape_read", text: "SELECT * FROM idem_shape" });
      await client.query("ALTER TABLE idem_shape ALTER COLUMN v TYPE bigint");
      const reshaped = await client.query({ name: "idem_shape_read", text: "SELECT * FROM idem_shape" }).catch((err) => err);
      assert.equal(reshaped.code, "0A000");
      assert.ok(preparedStatementLost(reshaped));
      assert.ok(preparedStatementLost({ code: "0A000", routine: "RevalidateCachedQuery", message: "le plan en cache ne doit pas modifier le type en résultat" }));
    } finally {
      await client.end();
    }
  });
});

describe("through PgBouncer in transaction mode", () => {
  test("four clients on two server connections prepare nothing and every call runs once", async () => {
    const prefix = unique("pooled");
    const clients = await Promise.all(
      Array.from({ length: 4 }, async () => {
        const client = new Client(pooledWriter);
        await client.connect();
        return client;
      }),
    );
    try {
      await Promise.all(
        clients.map(async (client, i) => {
          const protocol = new Protocol(client);
          for (let n = 0; n < CLAIMS_EACH; n++) await claimAndComplete(protocol, `${prefix}-${i}-${n}`);
        }),
      );
      // Whichever server connection each lands on, none holds a statement.
      for (const client of clients) assert.deepEqual(await preparedHere(client), []);
    } finally {
      await Promise.all(clients.map((client) => client.end()));
    }
    assert.equal(await countWhere("SELECT count(*) FROM idem.records WHERE biz_id LIKE $1 AND status = 'SUCCESS'", prefix), 4 * CLAIMS_EACH);
    assert.equal(await countWhere("SELECT count(*) FROM idem.attempts WHERE biz_id LIKE $1", prefix), 4 * CLAIMS_EACH);
  });

  test("a pool through the pooler sends its calls unnamed", async () => {
    const pool = new Pool({ ...pooledWriter, max: 4 });
    const prefix = unique("pooled-pool");
    try {
      const guard = new Guard(pool);
      const results = await Promise.all(
        Array.from({ length: 16 }, (_, n) => guard.run(payment(`${prefix}-${n}`), () => ({ ok: true }))),
      );
      for (const result of results) assert.ok(result.executed && result.ok, `${result.key}: ${result.error}`);
      assert.deepEqual(await preparedHere(pool), []);
      await guard.idle();
    } finally {
      await pool.end();
    }
    assert.equal(await countWhere("SELECT count(*) FROM idem.records WHERE biz_id LIKE $1 AND status = 'SUCCESS'", prefix), 16);
  });
});
