// idemwatch-proxy in front of a real Streamable HTTP MCP server (the official TypeScript SDK's
// McpServer and transport, in this process), called by the SDK's own client through the proxy.
// A charging tool is claimed by the key in params._meta: a retried tools/call charges once and
// replays the first result; an answer lost after the charge leaves the record UNKNOWN and every
// retry refused; other tools and methods pass through.
//
//   node mcp_test.mjs --proxy BINARY --dsn DSN --psql PSQL
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { randomUUID, webcrypto } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { z } from "zod";

// Node 18 (Debian 12's) has no global Web Crypto, which the SDK's server and client call for
// session ids and the like; later versions have it.
if (!globalThis.crypto) globalThis.crypto = webcrypto;

const { values: args } = parseArgs({
  options: { proxy: { type: "string" }, dsn: { type: "string" }, psql: { type: "string" } },
});
const KEY = "io.idemwatch/idempotencyKey";
const failures = [];
function check(ok, what) {
  console.log("proxy mcp:", ok ? "ok  " : "FAIL", what);
  if (!ok) failures.push(what);
}
function sql(query) {
  return execFileSync(args.psql, ["-X", "-At", "-d", args.dsn, "-c", query], { encoding: "utf8" }).trim();
}

// The upstream: tools that charge, refund and read, counting what they did.
const charges = new Map();
const refunds = new Map();
let balanceReads = 0;
function serverWithTools() {
  const server = new McpServer({ name: "payments", version: "1.0.0" });
  server.registerTool(
    "charge",
    { description: "Charge an order", inputSchema: { order_id: z.string(), amount_cents: z.number(), mode: z.string().optional() } },
    async ({ order_id, amount_cents, mode }) => {
      if (mode === "declined") throw new Error(`card declined for ${order_id}`);
      charges.set(order_id, (charges.get(order_id) ?? 0) + 1);
      const charge = `ch_${order_id}_${charges.get(order_id)}`;
      if (mode === "hang") await new Promise(() => {}); // charged; the answer never comes
      if (mode === "slow") await new Promise((r) => setTimeout(r, 300));
      return { content: [{ type: "text", text: `charged ${amount_cents} to ${order_id}: ${charge}` }] };
    },
  );
  server.registerTool(
    "refund",
    { description: "Refund a charge", inputSchema: { refund_id: z.string(), charge: z.string() } },
    async ({ refund_id, charge }) => {
      refunds.set(refund_id, (refunds.get(refund_id) ?? 0) + 1);
      return { content: [{ type: "text", text: `refunded ${charge} as ${refund_id}` }] };
    },
  );
  server.registerTool("balance", { description: "Read the balance", inputSchema: {} }, async () => {
    balanceReads += 1;
    return { content: [{ type: "text", text: `balance read ${balanceReads}` }] };
  });
  return server;
}

// /mcp: stateful, answers as event streams. /mcp-json: stateless, answers as JSON.
const sessions = new Map();
const upstream = createServer(async (req, res) => {
  let raw = "";
  for await (const chunk of req) raw += chunk;
  const body = raw ? JSON.parse(raw) : undefined;
  if (req.url === "/mcp-json") {
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    const server = serverWithTools();
    res.on("close", () => { transport.close(); server.close(); });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
    return;
  }
  const id = req.headers["mcp-session-id"];
  let transport = id ? sessions.get(id) : undefined;
  if (!transport) {
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sid) => sessions.set(sid, transport),
    });
    await serverWithTools().connect(transport);
  }
  await transport.handleRequest(req, res, body);
});
await new Promise((r) => upstream.listen(0, "127.0.0.1", r));
const upstreamPort = upstream.address().port;

// The proxy in front of it.
const work = mkdtempSync(join(tmpdir(), "idemwatch-proxy-mcp-"));
const listen = await new Promise((r) => {
  const s = createServer().listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => r(p)); });
});
const config = join(work, "proxy.yml");
writeFileSync(config, `listen: 127.0.0.1:${listen}
agent_header: X-Agent-Id
routes:
  - name: payments-mcp
    path: /mcp
    upstream: http://127.0.0.1:${upstreamPort}/mcp
    upstream_timeout: 2s
    mcp:
      tools:
        - name: charge
          biz_type: payment
          biz_id: /order_id
        - name: refund
          biz_type: refund
          biz_id: /refund_id
          key_from_arguments: [refund_id]
  - name: payments-mcp-json
    path: /mcp-json
    upstream: http://127.0.0.1:${upstreamPort}/mcp-json
    mcp:
      tools:
        - name: charge
          biz_type: payment
          biz_id: /order_id
          tool: charge_card
`);
const logFile = join(work, "proxy.log");
const proxy = spawn(args.proxy, ["--config.file", config, "--db.dsn", args.dsn], { stdio: ["ignore", "ignore", "pipe"] });
let proxyLog = "";
proxy.stderr.on("data", (d) => { proxyLog += d; });
for (let i = 0; i < 100 && !proxyLog.includes("listening"); i++) await new Promise((r) => setTimeout(r, 100));

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
async function connect(path) {
  const client = new Client({ name: "agent", version: "1.0.0" });
  const headers = { "X-Agent-Id": "refund-agent-7", traceparent: `00-${TRACE}-00f067aa0ba902b7-01` };
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${listen}${path}`), { requestInit: { headers } }));
  return client;
}
const text = (result) => (result.content ?? []).map((c) => c.text).join("");
const problem = (result) => result._meta?.["io.idemwatch/problem"] ?? "";
const call = (client, name, args, key) =>
  client.callTool(key === undefined ? { name, arguments: args } : { name, arguments: args, _meta: { [KEY]: key } });

let status = 0;
try {
  const client = await connect("/mcp");
  const tools = await client.listTools();
  check(tools.tools.map((t) => t.name).sort().join() === "balance,charge,refund",
    "initialize and tools/list pass through the proxy to a stateful server");

  // A retried call under one key charges once and replays the first result.
  const key = randomUUID();
  const first = await call(client, "charge", { order_id: "o-1", amount_cents: 500 }, key);
  const again = await call(client, "charge", { order_id: "o-1", amount_cents: 500 }, key);
  check(charges.get("o-1") === 1, `a retried tools/call under one key charges once (${charges.get("o-1")})`);
  check(text(first).startsWith("charged 500 to o-1") && text(again) === text(first) && !again.isError,
    `the retry gets the first result (${text(again)})`);
  check(again._meta?.["io.idemwatch/replayed"] === true && first._meta?.["io.idemwatch/replayed"] === undefined,
    "the replay says so in its _meta, the first answer does not");
  check(sql(`SELECT status || ' ' || tool FROM idem.records WHERE idempotency_key = 'tools/call payments-mcp ${key}'`) === "SUCCESS charge",
    "the record is SUCCESS under the route's scope, as tool 'charge'");
  check(sql(`SELECT string_agg(trigger_source || ':' || outcome, ',' ORDER BY id) FROM idem.attempts WHERE idempotency_key = 'tools/call payments-mcp ${key}'`) === "initial:executed,http:replayed",
    "the first attempt is initial, the unexplained repeat http");
  check(sql(`SELECT string_agg(DISTINCT agent_id || ' ' || trace_id, ',') FROM idem.attempts WHERE idempotency_key = 'tools/call payments-mcp ${key}'`) === `refund-agent-7 ${TRACE}`,
    "each attempt keeps the agent and trace the request named");

  // The same key with other arguments is refused, not run.
  const other = await call(client, "charge", { order_id: "o-1", amount_cents: 900 }, key);
  check(other.isError && problem(other).endsWith("payload_mismatch") && charges.get("o-1") === 1,
    `the same key with other arguments is a payload mismatch (${text(other)})`);

  // Ten concurrent calls under one key: one reaches the tool.
  const concurrentKey = randomUUID();
  const clients = await Promise.all(Array.from({ length: 10 }, () => connect("/mcp")));
  const results = await Promise.all(clients.map((c) =>
    call(c, "charge", { order_id: "o-concurrent", amount_cents: 700, mode: "slow" }, concurrentKey)));
  check(charges.get("o-concurrent") === 1, `10 concurrent calls under one key charge once (${charges.get("o-concurrent")})`);
  check(results.every((r) => (!r.isError && text(r).includes("o-concurrent")) || problem(r).endsWith("request-in-progress")),
    "each of the others got the result or an in-progress refusal");
  await Promise.all(clients.map((c) => c.close()));

  // The charge's answer is lost: UNKNOWN, and never sent again.
  const lostKey = randomUUID();
  const lost = await call(client, "charge", { order_id: "o-lost", amount_cents: 300, mode: "hang" }, lostKey);
  const retried = await call(client, "charge", { order_id: "o-lost", amount_cents: 300, mode: "hang" }, lostKey);
  check(lost.isError && problem(lost).endsWith("outcome-unknown") && /not be sent again/.test(text(lost)),
    `a lost answer is an unknown outcome the model is told of (${text(lost)})`);
  check(retried.isError && problem(retried).endsWith("outcome-unknown") && charges.get("o-lost") === 1,
    `its retry is refused and never reaches the tool (charged ${charges.get("o-lost")})`);
  check(sql(`SELECT status FROM idem.records WHERE idempotency_key = 'tools/call payments-mcp ${lostKey}'`) === "UNKNOWN",
    "its record is UNKNOWN for evidence or a person");

  // A tool that refuses (isError) is a final failure, replayed.
  const declinedKey = randomUUID();
  const declined = await call(client, "charge", { order_id: "o-declined", amount_cents: 100, mode: "declined" }, declinedKey);
  const declinedAgain = await call(client, "charge", { order_id: "o-declined", amount_cents: 100, mode: "declined" }, declinedKey);
  check(declined.isError && /card declined/.test(text(declined)) && text(declinedAgain) === text(declined)
      && declinedAgain._meta?.["io.idemwatch/replayed"] === true,
    "a tool's own error is final and replayed");
  check(sql(`SELECT status FROM idem.records WHERE idempotency_key = 'tools/call payments-mcp ${declinedKey}'`) === "FAILED",
    "its record is FAILED");

  // A claimed tool without a key is refused as invalid params; one keyed by its arguments is not.
  let missing = "";
  try { await call(client, "charge", { order_id: "o-nokey", amount_cents: 1 }); } catch (e) { missing = `${e.code} ${e.message}`; }
  check(missing.startsWith("-32602") && missing.includes(KEY) && !charges.has("o-nokey"),
    `a claimed tool called without a key is refused, naming the field (${missing})`);
  const r1 = await call(client, "refund", { refund_id: "rf-1", charge: "ch_o-1_1" });
  const r2 = await call(client, "refund", { refund_id: "rf-1", charge: "ch_o-1_1" });
  check(refunds.get("rf-1") === 1 && text(r2) === text(r1),
    `a tool keyed by its arguments refunds once without a key from the client (${refunds.get("rf-1")})`);

  // Tools not listed pass through, every time.
  await call(client, "balance", {});
  await call(client, "balance", {}, "ignored");
  check(balanceReads === 2, `an unclaimed tool runs on every call (${balanceReads})`);

  // A JSON-answering stateless server: the same guarantees, and the record's tool is the route's.
  const jsonClient = await connect("/mcp-json");
  const jsonKey = randomUUID();
  const j1 = await call(jsonClient, "charge", { order_id: "o-json", amount_cents: 250 }, jsonKey);
  const j2 = await call(jsonClient, "charge", { order_id: "o-json", amount_cents: 250 }, jsonKey);
  check(charges.get("o-json") === 1 && text(j2) === text(j1) && j2._meta?.["io.idemwatch/replayed"] === true,
    "a server answering in JSON charges once and replays");
  check(sql(`SELECT tool FROM idem.records WHERE idempotency_key = 'tools/call payments-mcp-json ${jsonKey}'`) === "charge_card",
    "the record's tool is the one the route names");

  // A client that accepts only an event stream gets the replay as one.
  const raw = await fetch(`http://127.0.0.1:${listen}/mcp-json`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: "raw-7", method: "tools/call",
      params: { name: "charge", arguments: { order_id: "o-json", amount_cents: 250 }, _meta: { [KEY]: jsonKey } } }),
  });
  const rawText = await raw.text();
  const event = JSON.parse(rawText.split("\n").find((l) => l.startsWith("data: ")).slice(6));
  check(raw.headers.get("content-type") === "text/event-stream" && raw.headers.get("idempotent-replayed") === "true"
      && event.id === "raw-7" && text(event.result) === text(j1),
    "a replay is sent as an event stream under the new request's id when that is all the client takes");

  // A batch may not smuggle a claimed call past its key.
  const batch = await fetch(`http://127.0.0.1:${listen}/mcp-json`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: JSON.stringify([{ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "charge", arguments: { order_id: "o-batch", amount_cents: 1 } } }]),
  });
  check(batch.status === 400 && !charges.has("o-batch"), `a claimed tool inside a batch is refused (${batch.status})`);

  // The proxy's own figures count what happened.
  const metrics = await (await fetch(`http://127.0.0.1:${listen}/metrics`)).text();
  const count = (route, result) => Number((metrics.match(new RegExp(`idemwatch_proxy_requests_total\\{result="${result}",route="${route}"\\} (\\d+)`)) ?? [])[1] ?? -1);
  check(count("payments-mcp", "unknown") === 1 && count("payments-mcp", "unknown_refused") === 1,
    "/metrics counts the unknown outcome and its refused retry");
  await client.close();
  await jsonClient.close();
} catch (e) {
  check(false, `unexpected: ${e.stack ?? e}`);
} finally {
  proxy.kill("SIGTERM");
  if (failures.length) {
    console.log(`--- proxy log\n${proxyLog}`);
    console.log(`${failures.length} check(s) failed`);
    status = 1;
  } else {
    console.log("every check passed");
  }
  process.exit(status);
}
