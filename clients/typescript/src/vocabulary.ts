// The protocol's vocabulary (docs/contract/schema.md, version 3): each value is the exact string the
// database stores and returns. One parse per type: an unknown value from the server throws rather
// than being guessed at.

export const TRIGGER_SOURCES = ["initial", "llm", "framework", "http", "callback"] as const;
/** Why this request was sent; the caller states it. */
export type TriggerSource = (typeof TRIGGER_SOURCES)[number];

export const OUTCOMES = [
  "executed", // this caller owns the record and must call downstream
  "replayed", // final: SUCCESS with its response, or a FAILED that may not run again
  "in_progress", // PROCESSING or UNKNOWN: do not call downstream
  "payload_mismatch", // same key, different request
  "rejected", // the business object succeeded, is in flight, or its side effect is recorded, under another key
  "retired", // the key was used and its record removed by retention
] as const;
export type Outcome = (typeof OUTCOMES)[number];

export const RECORD_STATUSES = ["PROCESSING", "SUCCESS", "FAILED", "UNKNOWN"] as const;
export type RecordStatus = (typeof RECORD_STATUSES)[number];

export const RESULT_CODES = [
  "ok",
  "conflict", // the version moved on: someone else changed the record
  "invalid_transition",
  "not_found",
  "not_claimant", // the claim token does not match
  "lease_active",
  "side_effect_recorded", // FAILED refused: the ledger records the side effect
] as const;
export type ResultCode = (typeof RESULT_CODES)[number];

function parser<T extends string>(what: string, values: readonly T[]) {
  return (text: unknown): T => {
    if (typeof text === "string" && (values as readonly string[]).includes(text)) return text as T;
    throw new Error(`unknown ${what} ${JSON.stringify(text)}: expected ${values.join(", ")}`);
  };
}

export const parseTriggerSource = parser("trigger source", TRIGGER_SOURCES);
export const parseOutcome = parser("outcome", OUTCOMES);
export const parseRecordStatus = parser("record status", RECORD_STATUSES);
export const parseResultCode = parser("result code", RESULT_CODES);
