// What the client tests share: the database they run against (clients/run_tests.sh creates it,
// migrated, with a login role holding only idem_writer), read-backs as the superuser, and a stand-in
// payment gateway that keeps its own ledger: the truth a double charge would show in.
import { randomUUID } from "node:crypto";
import { after } from "node:test";
import { Client, Pool } from "pg";

import { Guard, stableKey } from "../src";
import type { ToolCall, TriggerSource } from "../src";

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests through clients/run_tests.sh (ctest -R clients_)`);
  return value;
}

export const connection = {
  host: env("IDEMWATCH_CLIENT_HOST"),
  port: Number(env("IDEMWATCH_CLIENT_PORT")),
  database: env("IDEMWATCH_CLIENT_DATABASE"),
};
export const writer = { ...connection, user: env("IDEMWATCH_CLIENT_USER") };
export const superuser = { ...connection, user: env("IDEMWATCH_CLIENT_ADMIN_USER") };
/** The writer through PgBouncer in transaction mode, with fewer server connections than clients. */
export const pooledWriter = {
  host: env("IDEMWATCH_CLIENT_POOLED_HOST"),
  port: Number(env("IDEMWATCH_CLIENT_POOLED_PORT")),
  database: connection.database,
  user: writer.user,
};
/** The gateway's side (webhooks, statements): a login holding only idem_ledger. */
export const ledger = { ...connection, user: env("IDEMWATCH_CLIENT_LEDGER_USER") };

export function writerPool(max = 4): Pool {
  return new Pool({ ...writer, max });
}

/**
 * A writer pool and a Guard on it for the tests of one describe block (call it in the block): both
 * closed after them, once every late answer the guard still awaits is recorded.
 */
export function guardedPool(): { pool: Pool; guard: Guard } {
  const pool = writerPool();
  const guard = new Guard(pool);
  after(async () => {
    await guard.idle();
    await pool.end();
  });
  return { pool, guard };
}

export async function writerClient(): Promise<Client> {
  const client = new Client(writer);
  await client.connect();
  return client;
}

export async function adminQuery(sql: string, values: unknown[] = []): Promise<any[]> {
  const client = new Client(superuser);
  await client.connect();
  try {
    return (await client.query(sql, values)).rows;
  } finally {
    await client.end();
  }
}

export async function scalar(sql: string, values: unknown[] = []): Promise<any> {
  const rows = await adminQuery(sql, values);
  return rows.length ? Object.values(rows[0])[0] : undefined;
}

/** A business id no other test (or earlier run) uses: tests share one database. */
export function unique(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 12)}`;
}

type PaymentOptions = Partial<ToolCall> & { amount?: number; attempt?: number; traceId?: string; agentId?: string };

/** The tests' tool call: pay `amount` for an order, keyed by the order (and the attempt). */
export function payment(orderId: string, triggerSource: TriggerSource = "initial", extra: PaymentOptions = {}): ToolCall {
  const { amount = 2990, attempt = 1, traceId, agentId, ...rest } = extra;
  return {
    key: stableKey("payment", orderId, "pay", attempt),
    bizType: "payment",
    bizId: orderId,
    tool: "pay",
    payload: { orderId, amountMinor: amount, currency: "CNY" },
    context: { triggerSource, traceId, agentId },
    ...rest,
  };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A gateway that charges every request it receives: no idempotency of its own, like the seeds'. */
export class Gateway {
  private next = 1;
  private readonly prefix = randomUUID().slice(0, 8); // gateway refs are unique across the database's flows
  readonly charges = new Map<string, string[]>();

  charge(orderId: string, amountMinor: number): { gatewayRef: string; amountMinor: number } {
    const ref = `gw-${this.prefix}-${this.next++}`;
    this.charges.set(orderId, [...(this.charges.get(orderId) ?? []), ref]);
    return { gatewayRef: ref, amountMinor };
  }

  count(orderId: string): number {
    return this.charges.get(orderId)?.length ?? 0;
  }
}
