// What the guard costs per wrapped call, against the bare protocol from the same language.
//
//   IDEMWATCH_CLIENT_HOST=... IDEMWATCH_CLIENT_PORT=... IDEMWATCH_CLIENT_DATABASE=... \
//   IDEMWATCH_CLIENT_USER=... node dist/bench/overhead.js [CALLS]
//
// Five series over CALLS new keys each (default 10,000), one connection, median and p99 in
// microseconds: a bare `SELECT * FROM idem.begin(...)`; bare begin + complete (the least a correct
// caller sends, unnamed); the same through Protocol, its calls prepared once the connection (as
// shipped) and unnamed; the guarded call with an empty body (begin + complete through Guard.run).
import { randomUUID } from "node:crypto";
import { Client } from "pg";

import { BEGIN_SQL, COMPLETE_SQL, Guard, Protocol } from "../src";
import type { Statements } from "../src";

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.round((p / 100) * (sorted.length - 1)))];
}

async function main(calls: number) {
  const env = process.env;
  const client = new Client({
    host: env.IDEMWATCH_CLIENT_HOST,
    port: Number(env.IDEMWATCH_CLIENT_PORT),
    database: env.IDEMWATCH_CLIENT_DATABASE,
    user: env.IDEMWATCH_CLIENT_USER,
  });
  await client.connect();
  const run = randomUUID().slice(0, 8);
  const payload = JSON.stringify({ amount_minor: 2990, currency: "CNY" });
  const guard = new Guard(client);
  const protocolRound = (statements: Statements, tag: string) => {
    const protocol = new Protocol(client, { statements });
    return async (i: number) => {
      const key = `bench-${run}-${tag}-${i}`;
      const begun = await protocol.begin({ key, bizType: "bench", bizId: key, tool: "pay", triggerSource: "initial", payload: { amount_minor: 2990, currency: "CNY" } });
      await protocol.complete(key, begun.version!, { ok: true }, begun.claimToken);
    };
  };

  const series: Array<[string, (i: number) => Promise<unknown>]> = [
    [
      "bare begin",
      (i) => {
        const key = `bench-${run}-b-${i}`;
        return client.query(BEGIN_SQL, [key, "bench", key, "pay", null, "initial", payload, "30 seconds", null, null]);
      },
    ],
    [
      "bare begin+complete",
      async (i) => {
        const key = `bench-${run}-c-${i}`;
        const { rows } = await client.query(BEGIN_SQL, [key, "bench", key, "pay", null, "initial", payload, "30 seconds", null, null]);
        await client.query(COMPLETE_SQL, [key, rows[0].version, '{"ok": true}', rows[0].claim_token]);
      },
    ],
    ["protocol b+c prepared", protocolRound("prepared", "p")],
    ["protocol b+c unnamed", protocolRound("unnamed", "u")],
    [
      "guarded call",
      async (i) => {
        const key = `bench-${run}-g-${i}`;
        (await guard.run({ key, bizType: "bench", bizId: key, tool: "pay", payload: { amount_minor: 2990, currency: "CNY" } }, () => ({ ok: true }))).unwrap();
      },
    ],
  ];
  // The series in turn, ROUNDS times (env IDEMWATCH_CLIENT_BENCH_ROUNDS, default 1): on a shared
  // machine, a series' figure is read against the others of its round.
  const rounds = Number(env.IDEMWATCH_CLIENT_BENCH_ROUNDS ?? 1);
  for (let round = 1; round <= rounds; round++) {
    for (const [name, fn] of series) {
      for (let i = 0; i < Math.min(500, calls); i++) await fn(-1 - i - round * calls); // warm-up
      const samples: number[] = [];
      for (let i = 0; i < calls; i++) {
        const start = process.hrtime.bigint();
        await fn(i + round * calls * 2);
        samples.push(Number(process.hrtime.bigint() - start) / 1000);
      }
      const median = percentile(samples, 50);
      console.log(`node ${round} ${name.padEnd(22)} median ${median.toFixed(1).padStart(8)} us   p99 ${percentile(samples, 99).toFixed(1).padStart(8)} us`);
    }
  }
  await client.end();
}

main(Number(process.argv[2] ?? 10_000)).catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
