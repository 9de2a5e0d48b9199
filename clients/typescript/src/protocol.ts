// The protocol functions of the idem schema as typed calls, one autocommit statement each. This is
// the thin layer: it says exactly what the database said. `Guard` (guard.ts) builds the correct use
// of a tool call on it; use this directly only for what the guard does not do.
//
// Every call must commit on its own: `begin` must be durable before the caller goes downstream. Pass
// a pg.Pool or a pg.Client that is not inside BEGIN ... COMMIT.
import {
  FUND_FLOW_KINDS,
  parseOutcome,
  parseRecordStatus,
  parseResultCode,
  parseStatementLineResult,
  parseTriggerSource,
} from "./vocabulary";
import type { FundFlowKind, Outcome, RecordStatus, ResultCode, StatementLineResult, TriggerSource } from "./vocabulary";

/**
 * What the protocol needs of node-postgres: a pg.Pool, a pg.Client or a pg.PoolClient. A claim's
 * calls are prepared only on those three (a named query, `{ name, text, values }`); anything else
 * answering `query(text, values)` gets every call unnamed.
 */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: any[] }>;
}

/**
 * How a claim's four calls (begin, complete, fail, markUnknown) are sent. "prepared" (the
 * default): once a connection as a named statement, which spares the server parsing and planning
 * them on every call, and unnamed behind a pooler that shares server connections between clients
 * (PgBouncer in transaction mode), where a connection's statements are not its own. "unnamed": every
 * call parsed and planned anew.
 */
export type Statements = "prepared" | "unnamed";

export interface ProtocolOptions {
  statements?: Statements;
}

// Every parameter typed, so that a NULL never leaves the function call ambiguous.
export const BEGIN_SQL =
  "SELECT outcome, status, version, response_payload, claim_token::text AS claim_token FROM idem.begin(" +
  "$1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::jsonb, $8::interval, $9::text, $10::text)";
export const COMPLETE_SQL =
  "SELECT result, status, version FROM idem.complete($1::text, $2::integer, $3::jsonb, $4::uuid)";
export const FAIL_SQL =
  "SELECT result, status, version FROM idem.fail($1::text, $2::integer, $3::text, $4::uuid, $5::boolean)";
export const MARK_UNKNOWN_SQL =
  "SELECT result, status, version FROM idem.mark_unknown($1::text, $2::integer, $3::text, $4::uuid)";
// The gateway's word (a login granted idem_ledger) and the claimant's (idem_writer, with its token).
export const RECORD_FUND_FLOW_SQL =
  "SELECT flow_id::text AS flow_id, is_duplicate FROM idem.record_fund_flow(" +
  "$1::text, $2::text, $3::text, $4::bigint, $5::text, $6::text, $7::text)";
export const RECORD_CLAIMANT_FLOW_SQL =
  "SELECT flow_id::text AS flow_id, is_duplicate FROM idem.record_fund_flow(" +
  "$1::text, $2::text, $3::text, $4::bigint, $5::text, $6::text, $7::text, $8::uuid)";
// The gateway's callback (a webhook event), on a login granted idem_ledger.
export const INGEST_CALLBACK_SQL =
  "SELECT result, record_key, flow_id::text AS flow_id, record_status, already_received FROM idem.ingest_callback(" +
  "$1::text, $2::text, $3::text, $4::bigint, $5::text, $6::text, $7::text, $8::text, $9::jsonb)";

export const DEFAULT_LEASE_MS = 30_000;
/** The schema's bound of a flow's amount (idem.check_fund_flow). */
export const MAX_AMOUNT_MINOR = 999_999_999_999_999;
const GATEWAY = /^[A-Za-z0-9_.-]{1,64}$/;
const CURRENCY = /^[A-Z]{3}$/;

export interface BeginRequest {
  key: string;
  bizType: string;
  bizId: string;
  tool: string;
  triggerSource: TriggerSource;
  payload: unknown;
  /** null: the database hashes the payload's jsonb text. */
  requestHash?: string | null;
  leaseMs?: number;
  agentId?: string | null;
  traceId?: string | null;
}

export interface BeginResult {
  outcome: Outcome;
  /** The key's record; null when rejected. */
  status: RecordStatus | null;
  version: number | null;
  /** The stored response (replayed SUCCESS) or {"error": ...} (replayed FAILED). */
  responsePayload: unknown;
  /** Only for `executed`: the proof that this caller is the claimant. */
  claimToken: string | null;
}

/** What the claimant holds after `executed`: everything complete / fail / markUnknown need. */
export interface Claim {
  key: string;
  version: number;
  /** null only if the server gave none: every report is then not_claimant. */
  token: string | null;
}

export interface ChangeResult {
  result: ResultCode;
  /** After the call, or the current one when refused (null for not_claimant / not_found). */
  status: RecordStatus | null;
  version: number | null;
}

/** A gateway's webhook event, as idem.ingest_callback takes it. */
export interface CallbackEvent {
  /** The gateway's name (1 to 64 of A-Z a-z 0-9 _ . -), as its statements are imported under. */
  gateway: string;
  /** The gateway's id of the event: a re-delivery is known by it. */
  eventId: string;
  kind: FundFlowKind;
  /** The gross amount in minor units, never negative: the kind is the direction. */
  amountMinor: number | bigint;
  /** Three capital letters (ISO 4217). */
  currency: string;
  /** The gateway's reference of the side effect (the charge id, never the event id). */
  gatewayRef: string;
  /** The key the client gave the gateway (Stripe metadata, Adyen merchant reference, EndToEndId). */
  idempotencyKey?: string | null;
  bizId?: string | null;
  /** The event as received (JSON), kept as the evidence. */
  payload?: unknown;
}

/** What idem.ingest_callback found for a gateway's event, the same on every re-delivery. */
export interface CallbackResult {
  /** matched, mismatched (a person decides), unmatched or duplicate. */
  result: StatementLineResult;
  /** The record the event names, when one does. */
  recordKey: string | null;
  /** The ledger's flow of the side effect (bigint as text), when matched. */
  flowId: string | null;
  /** The record's status now (SUCCESS once a match resolved it). */
  recordStatus: RecordStatus | null;
  /** A re-delivery: nothing was done again. */
  alreadyReceived: boolean;
}

function text(name: string, value: unknown, required = true): string | null {
  if (!required && (value === undefined || value === null)) return null;
  const length = typeof value === "string" ? Array.from(value).length : 0;
  if (typeof value !== "string" || value.trim() === "" || length > 255) {
    const shown = length > 255 ? `${length} characters` : JSON.stringify(value);
    const need = `a non-blank string of at most 255 characters${required ? "" : ", or null"}`;
    throw new TypeError(`ingestCallback: ${name} must be ${need}, got ${shown}`);
  }
  return value;
}

/** The arguments of idem.ingest_callback, checked before anything reaches the database. */
function callbackParams(event: CallbackEvent): unknown[] {
  const { gateway, eventId, kind, amountMinor, currency, gatewayRef } = event;
  if (typeof gateway !== "string" || !GATEWAY.test(gateway)) {
    throw new TypeError(`ingestCallback: gateway must be 1 to 64 characters of A-Z a-z 0-9 _ . -, got ${JSON.stringify(gateway)}`);
  }
  text("eventId (the gateway's id of the event: a re-delivery is known by it)", eventId);
  if (typeof kind !== "string" || !(FUND_FLOW_KINDS as readonly string[]).includes(kind)) {
    throw new TypeError(`ingestCallback: kind must be a fund flow kind (${FUND_FLOW_KINDS.join(", ")}), got ${JSON.stringify(kind)}`);
  }
  const integer = typeof amountMinor === "bigint" || Number.isSafeInteger(amountMinor);
  if (!integer || amountMinor < 0 || amountMinor > MAX_AMOUNT_MINOR) {
    const shown = typeof amountMinor === "bigint" ? `${amountMinor}n` : JSON.stringify(amountMinor);
    throw new TypeError(
      `ingestCallback: amountMinor must be an integer number of minor units from 0 to ${MAX_AMOUNT_MINOR}` +
        ` (the gateway's gross amount, never negative: the kind is the direction), got ${shown}`,
    );
  }
  if (typeof currency !== "string" || !CURRENCY.test(currency)) {
    throw new TypeError(`ingestCallback: currency must be three capital letters (ISO 4217, e.g. EUR), got ${JSON.stringify(currency)}`);
  }
  text("gatewayRef (the gateway's reference of the side effect: the charge id, not the event id)", gatewayRef);
  const idempotencyKey = text("idempotencyKey", event.idempotencyKey, false);
  const bizId = text("bizId", event.bizId, false);
  const payload = event.payload === undefined || event.payload === null ? null : json(event.payload);
  return [gateway, eventId, kind, String(amountMinor), currency, gatewayRef, idempotencyKey, bizId, payload];
}

function status(value: unknown): RecordStatus | null {
  return value === null || value === undefined ? null : parseRecordStatus(value);
}

function change(row: any): ChangeResult {
  return { result: parseResultCode(row.result), status: status(row.status), version: row.version ?? null };
}

// node-postgres sends a JS value for a jsonb parameter as JSON text only for objects and arrays; a
// bare string would be sent as the string itself. Serialise everything explicitly.
function json(value: unknown): string {
  return JSON.stringify(value === undefined ? null : value);
}

/**
 * How many times a call runs when it keeps ending in a serialization failure (40001) or a deadlock
 * (40P01). Such a call changed nothing: it runs again in a new transaction, whose snapshot gives
 * the contract's answer, as REPEATABLE READ and SERIALIZABLE (a role's or a database's default) ask
 * of every client.
 */
export const SERIALIZATION_RETRIES = 8;
const TRANSIENT = new Set(["40001", "40P01"]);

/**
 * A prepared statement's name: the call's and a hash of its text (64-bit FNV-1a), so that on a
 * server connection a pooler shares, a name always means the same text whichever client prepared it.
 */
export function preparedName(what: string, sql: string): string {
  let hash = 0xcbf29ce484222325n;
  for (const byte of Buffer.from(sql, "utf8")) {
    hash = ((hash ^ BigInt(byte)) * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return `idem_${what}_${hash.toString(16).padStart(16, "0")}`;
}

const CLAIM_STATEMENTS = new Map(
  Object.entries({ begin: BEGIN_SQL, complete: COMPLETE_SQL, fail: FAIL_SQL, mark_unknown: MARK_UNKNOWN_SQL }).map(
    ([what, sql]) => [sql, preparedName(what, sql)],
  ),
);

/**
 * What the server answers when a prepared statement is not there as the connection left it: the
 * session lost it (26000), another client's holds the name (42P05), or its plan no longer fits
 * (0A000 "cached plan must not change result type", raised by the server's RevalidateCachedQuery,
 * which names it whatever language the server's messages are in). Nothing ran: the call runs again
 * unnamed.
 */
export function preparedStatementLost(err: unknown): boolean {
  const e = err as { code?: unknown; routine?: unknown; message?: unknown } | null;
  if (e?.code === "26000" || e?.code === "42P05") return true;
  if (e?.code !== "0A000") return false;
  return e.routine === "RevalidateCachedQuery" || String(e.message ?? "").includes("cached plan must not change result type");
}

interface PgClientLike extends Queryable {
  processID: number | null;
}
interface PgPoolLike extends Queryable {
  totalCount: number;
  connect(): Promise<PgClientLike & { release(err?: Error | boolean): void }>;
}

const SERVER_PID_SQL = "SELECT pg_catalog.pg_backend_pid() AS pid";
// Per pg.Pool, pg.Client or pg.PoolClient: whether a claim's calls are prepared there. Asked once.
const preparing = new WeakMap<object, Promise<boolean>>();

// A pooler answers the startup itself: the backend pid a connection was told is not its server's.
// A pool's connections all go to one address, so one of them answers for the pool.
async function ownSession(db: Queryable): Promise<boolean> {
  const pool = db as Partial<PgPoolLike>;
  if (typeof pool.totalCount === "number" && typeof pool.connect === "function") {
    const client = await pool.connect();
    try {
      return await ownSession(client);
    } finally {
      client.release();
    }
  }
  const client = db as Partial<PgClientLike>;
  if (typeof client.processID !== "number") return false;
  const { rows } = await db.query(SERVER_PID_SQL);
  return rows[0]?.pid === client.processID;
}

function prepares(db: Queryable): Promise<boolean> {
  // A pg.Client not connected yet (its first queries wait in its queue) has no backend pid to
  // compare: unnamed until it has one, then asked.
  if ((db as Partial<PgClientLike>).processID === null) return Promise.resolve(false);
  let answer = preparing.get(db);
  if (answer === undefined) {
    answer = ownSession(db);
    preparing.set(db, answer);
    // A check that failed (the server unreachable) is asked again by the next call.
    answer.catch(() => preparing.delete(db));
  }
  return answer;
}

export class Protocol {
  readonly statements: Statements;

  constructor(
    readonly db: Queryable,
    options: ProtocolOptions = {},
  ) {
    const statements = options.statements ?? "prepared";
    if (statements !== "prepared" && statements !== "unnamed") {
      throw new TypeError(`Protocol: statements must be "prepared" or "unnamed", got ${JSON.stringify(statements)}`);
    }
    this.statements = statements;
  }

  // The query as sent: a claim's call named where this connection prepares, else its text alone.
  private async send(sql: string, values: unknown[]): Promise<{ rows: any[] }> {
    const name = this.statements === "prepared" ? CLAIM_STATEMENTS.get(sql) : undefined;
    if (name === undefined || !(await prepares(this.db))) return this.db.query(sql, values);
    const named = this.db as unknown as { query(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: any[] }> };
    try {
      return await named.query({ name, text: sql, values });
    } catch (err) {
      if (!preparedStatementLost(err)) throw err;
      // Nothing ran. This connection's statements are not its own: unnamed from now on.
      preparing.set(this.db, Promise.resolve(false));
      return this.db.query(sql, values);
    }
  }

  private async one(sql: string, values: unknown[]): Promise<any> {
    for (let attempt = 1; ; attempt++) {
      try {
        const { rows } = await this.send(sql, values);
        return rows[0];
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        if (typeof code !== "string" || !TRANSIENT.has(code) || attempt === SERIALIZATION_RETRIES) throw err;
        // 0.5 to 1 ms after the first failure, doubling each time (32 to 64 ms before the last),
        // spread at random so the racers that failed together part.
        const ceiling = 2 ** Math.min(attempt - 1, 7);
        await new Promise((resolve) => setTimeout(resolve, ceiling * (0.5 + Math.random() / 2)));
      }
    }
  }

  async begin(request: BeginRequest): Promise<BeginResult> {
    const source = parseTriggerSource(request.triggerSource);
    const leaseMs = request.leaseMs ?? DEFAULT_LEASE_MS;
    const row = await this.one(BEGIN_SQL, [
      request.key,
      request.bizType,
      request.bizId,
      request.tool,
      request.requestHash ?? null,
      source,
      json(request.payload),
      `${leaseMs} milliseconds`,
      request.agentId ?? null,
      request.traceId ?? null,
    ]);
    return {
      outcome: parseOutcome(row.outcome),
      status: status(row.status),
      version: row.version ?? null,
      responsePayload: row.response_payload ?? null,
      claimToken: row.claim_token ?? null,
    };
  }

  async complete(key: string, expectedVersion: number, response: unknown, claimToken: string | null): Promise<ChangeResult> {
    return change(await this.one(COMPLETE_SQL, [key, expectedVersion, json(response), claimToken]));
  }

  /** retryAllowed false: a definite business failure, final. true: it never reached downstream. */
  async fail(key: string, expectedVersion: number, error: string, claimToken: string | null, retryAllowed = false): Promise<ChangeResult> {
    return change(await this.one(FAIL_SQL, [key, expectedVersion, error, claimToken, retryAllowed]));
  }

  async markUnknown(key: string, expectedVersion: number, reason: string, claimToken: string | null): Promise<ChangeResult> {
    return change(await this.one(MARK_UNKNOWN_SQL, [key, expectedVersion, reason, claimToken]));
  }

  /**
   * One line of the ledger. Without `claimToken`, the gateway's word (a callback, a statement line),
   * on a login granted idem_ledger. With it, the claimant reporting its own side effect under
   * `idempotencyKey`, on an idem_writer login; a wrong token is refused (SQLSTATE 42501) and
   * nothing is written.
   */
  async recordFundFlow(flow: {
    bizType: string;
    bizId: string;
    kind: FundFlowKind;
    amountMinor: number | bigint;
    currency: string;
    externalRef: string;
    idempotencyKey?: string | null;
    claimToken?: string | null;
  }): Promise<{ flowId: string; isDuplicate: boolean }> {
    const params = [
      flow.bizType,
      flow.bizId,
      flow.kind,
      String(flow.amountMinor),
      flow.currency,
      flow.externalRef,
      flow.idempotencyKey ?? null,
    ];
    const row = flow.claimToken
      ? await this.one(RECORD_CLAIMANT_FLOW_SQL, [...params, flow.claimToken])
      : await this.one(RECORD_FUND_FLOW_SQL, params);
    return { flowId: row.flow_id, isDuplicate: row.is_duplicate };
  }

  /**
   * The gateway's callback (a webhook event), on a login granted idem_ledger: matched to its record
   * by `idempotencyKey` (the key the client gave the gateway), else by `gatewayRef`, else by
   * `bizId`. Matched, its flow enters the ledger under `gatewayRef` (the charge's or refund's id,
   * never the event's: the statement line of the same side effect is then the same flow) and an
   * UNKNOWN record is resolved SUCCESS. Once per `eventId`: a re-delivery changes nothing and
   * returns what the first delivery found (`alreadyReceived`). The event is checked first (a
   * TypeError, nothing sent).
   */
  async ingestCallback(event: CallbackEvent): Promise<CallbackResult> {
    const row = await this.one(INGEST_CALLBACK_SQL, callbackParams(event));
    return {
      result: parseStatementLineResult(row.result),
      recordKey: row.record_key ?? null,
      flowId: row.flow_id ?? null,
      recordStatus: status(row.record_status),
      alreadyReceived: row.already_received === true,
    };
  }
}

/**
 * A webhook handler's one call: `new Protocol(db).ingestCallback(event)` on a pg.Pool or pg.Client
 * of a login granted idem_ledger (not inside BEGIN ... COMMIT).
 */
export function ingestCallback(db: Queryable, event: CallbackEvent): Promise<CallbackResult> {
  return new Protocol(db).ingestCallback(event);
}
