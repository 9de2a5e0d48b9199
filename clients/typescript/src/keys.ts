// Idempotency keys that survive retries. The anchors' most common bug is a key minted per call (a
// uuid, a timestamp, a count of tries), so every model, framework or HTTP retry is a new payment. A
// key names the business intent: this business object, this tool, this attempt as the business
// means it (1 unless it decided to try again after a final failure), never a retry count.
//
// Readable for operators, the same algorithm as the Python client: `biz_type/biz_id:tool:attempt`,
// with `%`, `/` and `:` percent-escaped in each part so that two triples can never give one key; a
// key over the schema's 255 characters keeps a prefix and ends in the SHA-256 of the full form.
//
// `compactKey` is the same intent's key for a gateway field that takes fewer characters than the
// schema (SEPA's EndToEndId: 35 of a small character set): the record is claimed under it, and the
// same string goes to the gateway (gatewayRefs.ts), whose statements and callbacks then name the
// record exactly.
import { createHash } from "node:crypto";

export const MAX_KEY_LENGTH = 255;
/** compactKey: SEPA's EndToEndId, the shortest field a key goes into, takes 35 characters. */
export const COMPACT_KEY_LENGTH = 35;
const COMPACT_DIGEST_LENGTH = 20; // hex characters of the SHA-256: 80 bits
const COMPACT_PREFIX_LENGTH = COMPACT_KEY_LENGTH - COMPACT_DIGEST_LENGTH - 1;
// A stable key of these characters only (one `/`, never first or last) is in SEPA's set as it is.
const COMPACT_AS_IS = /^[A-Za-z0-9/:.-]+$/;

function escape(part: string): string {
  return part.replace(/%/g, "%25").replace(/\//g, "%2F").replace(/:/g, "%3A");
}

export function stableKey(bizType: string, bizId: string, tool: string, attempt = 1): string {
  for (const [name, value] of [["bizType", bizType], ["bizId", bizId], ["tool", tool]] as const) {
    if (typeof value !== "string" || value.trim() === "") {
      throw new TypeError(`stableKey: ${name} must be a non-blank string, got ${JSON.stringify(value)}`);
    }
  }
  if (!Number.isSafeInteger(attempt) || attempt < 1) {
    throw new TypeError(`stableKey: attempt must be an integer >= 1 stated by the business, got ${JSON.stringify(attempt)}`);
  }
  const key = `${escape(bizType)}/${escape(bizId)}:${escape(tool)}:${attempt}`;
  // The schema counts characters; so does the Python client (code points, not UTF-16 units).
  const chars = Array.from(key);
  if (chars.length <= MAX_KEY_LENGTH) return key;
  const digest = createHash("sha256").update(key, "utf8").digest("hex");
  return `${chars.slice(0, MAX_KEY_LENGTH - digest.length - 1).join("")}~${digest}`;
}

/**
 * The key of one business intent in at most 35 characters of SEPA's character set, so that it fits
 * every field a gateway keeps it in (SEPA's EndToEndId, Adyen's merchant reference, Stripe's
 * metadata); the same inputs give the same key, every time, in both clients.
 *
 * It is `stableKey(...)` itself when that fits (`payment/order-42:pay:1`); else the stable key's
 * start, its runs of other characters written `-` (14 characters at most), a `.` and the first 20
 * hex characters of the SHA-256 of the stable key. The two forms never meet: a stable key always
 * has `:`, the digest form never. Claim the record under this key and give the gateway this same
 * string.
 */
export function compactKey(bizType: string, bizId: string, tool: string, attempt = 1): string {
  const key = stableKey(bizType, bizId, tool, attempt);
  if (key.length <= COMPACT_KEY_LENGTH && COMPACT_AS_IS.test(key)) return key;
  const digest = createHash("sha256").update(key, "utf8").digest("hex").slice(0, COMPACT_DIGEST_LENGTH);
  const prefix = key
    .replace(/[^A-Za-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, COMPACT_PREFIX_LENGTH)
    .replace(/-+$/, "");
  return `${prefix || "key"}.${digest}`;
}

// `toolCallKey` is the key of one tool call of one agent run, for a tool behind idemwatch-proxy
// that a client reaches through MCP or HTTP without a business key at hand: the run's id, the step
// and the tool, never the JSON-RPC id or anything else that changes on a retry. `mcpMeta` puts it
// where the proxy reads it, in a `tools/call`'s `params._meta`.

/** The proxy takes an MCP call's key of at most 200 printable ASCII characters. */
export const MAX_TOOL_CALL_KEY_LENGTH = 200;
export const MCP_KEY_FIELD = "io.idemwatch/idempotencyKey";
const PLAIN = /^[A-Za-z0-9._~-]$/;

function percent(part: string): string {
  let out = "";
  for (const ch of part) {
    if (PLAIN.test(ch)) {
      out += ch;
    } else {
      for (const byte of Buffer.from(ch, "utf8")) out += `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
    }
  }
  return out;
}

/**
 * The key of one tool call of one agent run: `run:RUN:STEP:TOOL`, each part percent-escaped (every
 * byte outside letters, digits and `._~-`), so printable ASCII whatever the run's id; the same
 * inputs give the same key in both clients. `step` is the run's own numbering of the call (the turn
 * and the call's place in it), kept across retries; never the JSON-RPC id, which a client changes
 * on every retry. A key over 200 characters keeps a prefix and ends in `~` and the SHA-256 of the
 * full form.
 */
export function toolCallKey(runId: string, step: number | string, tool: string): string {
  for (const [name, value] of [["runId", runId], ["tool", tool]] as const) {
    if (typeof value !== "string" || value.trim() === "") {
      throw new TypeError(`toolCallKey: ${name} must be a non-blank string, got ${JSON.stringify(value)}`);
    }
  }
  const stepOk =
    (typeof step === "number" && Number.isSafeInteger(step) && step >= 0) ||
    (typeof step === "string" && step.trim() !== "");
  if (!stepOk) {
    throw new TypeError(`toolCallKey: step must be an integer >= 0 or a non-blank string, got ${JSON.stringify(step)}`);
  }
  const key = `run:${percent(runId)}:${percent(String(step))}:${percent(tool)}`;
  if (key.length <= MAX_TOOL_CALL_KEY_LENGTH) return key;
  const digest = createHash("sha256").update(key, "utf8").digest("hex");
  return `${key.slice(0, MAX_TOOL_CALL_KEY_LENGTH - digest.length - 1)}~${digest}`;
}

/** The `_meta` of an MCP `tools/call` that carries `key` to idemwatch-proxy. */
export function mcpMeta(key: string): Record<string, string> {
  if (typeof key !== "string" || key.length === 0 || key.length > MAX_TOOL_CALL_KEY_LENGTH || !/^[\x20-\x7e]+$/.test(key)) {
    throw new TypeError(`mcpMeta: a key is 1 to ${MAX_TOOL_CALL_KEY_LENGTH} printable ASCII characters, got ${JSON.stringify(key)}`);
  }
  return { [MCP_KEY_FIELD]: key };
}
