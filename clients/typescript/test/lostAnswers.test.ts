// Answers lost on the wire, as in a failover or a reset: a TCP layer between the guard's pool and
// PostgreSQL drops the server's answer to one call, after the server committed it, and then
// refuses new connections for a moment, as a cluster does while a replica takes over. The guard
// sends the same call again (the same key, token and version) and the record ends where one send
// would have left it; the tool body never runs twice.
import assert from "node:assert/strict";
import net from "node:net";
import { after, describe, test } from "node:test";
import { Pool } from "pg";

import { Guard, InProgress, NotSent, RetryableFailure } from "../src";
import { Gateway, payment, scalar, unique, writer } from "./support";

class AnswerDropper {
  readonly server: net.Server;
  private marker: Buffer | null = null;
  private refuseFor = 0;
  private refusingUntil = 0;
  dropped = 0;

  constructor(private readonly target: { host: string; port: number }) {
    this.server = net.createServer((client) => {
      if (Date.now() < this.refusingUntil) {
        client.destroy();
        return;
      }
      const upstream = net.connect(this.target.port, this.target.host);
      const cut = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on("data", (chunk) => upstream.write(chunk));
      upstream.on("data", (chunk: Buffer) => {
        if (this.marker && chunk.includes(this.marker)) {
          this.marker = null;
          this.dropped++;
          this.refusingUntil = Date.now() + this.refuseFor;
          cut();
          return;
        }
        client.write(chunk);
      });
      client.on("error", cut).on("close", cut);
      upstream.on("error", cut).on("close", cut);
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    return (this.server.address() as net.AddressInfo).port;
  }

  arm(marker: string, refuseForMs: number): void {
    this.marker = Buffer.from(marker);
    this.refuseFor = refuseForMs;
  }
}

describe("answers lost on the wire", async () => {
  const wire = new AnswerDropper({ host: "127.0.0.1", port: writer.port });
  const port = await wire.listen();
  const pool = new Pool({ ...writer, host: "127.0.0.1", port, max: 2, connectionTimeoutMillis: 2000 });
  pool.on("error", () => undefined); // an idle client the wire cut: the pool drops it
  const guard = new Guard(pool);
  const gateway = new Gateway();
  after(async () => {
    await guard.idle();
    await pool.end();
    wire.server.close();
  });

  const transitions = (key: string) =>
    scalar(
      "SELECT string_agg(coalesce(from_status, 'none') || '>' || to_status, ',' ORDER BY id) FROM idem.transitions WHERE idempotency_key = $1",
      [key],
    );

  test("a lost answer to complete is sent again and counts as recorded", async () => {
    const order = unique("lost-complete");
    let ran = 0;
    wire.arm("SUCCESS", 1000); // the answer to complete names the new status
    const result = await guard.run(payment(order), () => {
      ran++;
      return gateway.charge(order, 2990);
    });
    assert.equal(wire.dropped, 1);
    assert.equal(result.error, null, String(result.error));
    assert.equal(result.outcome, "executed");
    assert.equal(ran, 1);
    assert.equal(await transitions(payment(order).key), "none>PROCESSING,PROCESSING>SUCCESS");
    const again = await guard.run(payment(order), () => ran++);
    assert.equal(again.outcome, "replayed");
    assert.equal(ran, 1);
  });

  test("a lost answer to fail is sent again and the call may be retried", async () => {
    const order = unique("lost-fail");
    wire.arm("FAILED", 500);
    const result = await guard.run(payment(order), () => {
      throw new NotSent("the gateway refused the connection");
    });
    assert.equal(wire.dropped, 2);
    assert.ok(result.error instanceof RetryableFailure, String(result.error));
    let ran = 0;
    const retried = await guard.run(payment(order), () => {
      ran++;
      return gateway.charge(order, 2990);
    });
    assert.equal(retried.error, null, String(retried.error));
    assert.equal(ran, 1);
  });

  test("a lost answer to a claim is sent again and the body never runs unclaimed", async () => {
    // The claim committed, its answer (executed, with the token) was lost: the second send finds
    // the record in progress, so the body does not run; the record waits for its lease to end.
    const order = unique("lost-claim");
    let ran = 0;
    wire.arm("executed", 500);
    const result = await guard.run(payment(order), () => ran++);
    assert.equal(wire.dropped, 3);
    assert.ok(result.error instanceof InProgress, String(result.error));
    assert.equal(ran, 0);
    assert.equal(await scalar("SELECT status FROM idem.records WHERE idempotency_key = $1", [payment(order).key]), "PROCESSING");
  });
});
