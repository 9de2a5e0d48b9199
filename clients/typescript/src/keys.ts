// Idempotency keys that survive retries. The anchors' most common bug is a key minted per call (a
// uuid, a timestamp, a count of tries), so every model, framework or HTTP retry is a new payment. A
// key names the business intent: this business object, this tool, this attempt as the business
// means it (1 unless it decided to try again after a final failure), never a retry count.
//
// Readable for operators, the same algorithm as the Python client: `biz_type/biz_id:tool:attempt`,
// with `%`, `/` and `:` percent-escaped in each part so that two triples can never give one key; a
// key over the schema's 255 characters keeps a prefix and ends in the SHA-256 of the full form.
import { createHash } from "node:crypto";

export const MAX_KEY_LENGTH = 255;

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
