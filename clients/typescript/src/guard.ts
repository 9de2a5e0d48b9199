// The correct use of the protocol around one tool call, so that it is the easy one.
//
//   const guard = new Guard(pool);
//   const pay = guard.tool({ bizType: "payment", bizId: "orderId", tool: "pay" },
//                          async (args: { orderId: string; amountMinor: number }) => gateway.charge(args));
//   await withCallContext({ triggerSource: "llm", traceId, agentId }, () => pay({ orderId: "order-42", amountMinor: 2990 }));
//
// What each answer of idem.begin leads to:
// - executed: the body runs once; its value is stored (complete) and returned. It throws
//   BusinessFailure -> final fail, the caller gets FinalFailure; NotSent (or ECONNREFUSED) ->
//   fail(retry_allowed => true), the caller gets RetryableFailure; anything else, a timeout above
//   all -> mark_unknown, the caller gets OutcomeUnknown.
// - replayed SUCCESS: the stored response, the body does not run. replayed FAILED: FinalFailure
//   with the stored error, for the model.
// - in_progress: InProgress ("do not retry"); retired / rejected / payload_mismatch: Refused.
// - a report answered `conflict` because the lease ran out and the record became UNKNOWN: the
//   claimant reports again at the version the answer carries (its answer came late); the body is
//   never run again. Any other refused report: NotRecorded, never a re-run.
// - executed, but the answer arrived after the lease ran out (counted from the claim's send: a
//   commit that waited for a synchronous standby, a stalled connection): meanwhile the record looked
//   abandoned and a person may have settled it, so the body does not run. The claim is given back
//   (fail with retry_allowed: it never went downstream); the caller gets RetryableFailure.
// - a call whose connection broke (a failover, a reset) is sent again, the same call with the same
//   key, token and version, after each of RESEND_PAUSES_MS: a claim answers from the record, a
//   report `ok` or `conflict` with the state its first send reached (recorded). Never a re-run.
import { AsyncLocalStorage } from "node:async_hooks";
import { performance } from "node:perf_hooks";

import * as errors from "./errors";
import { stableKey } from "./keys";
import { BeginResult, Claim, DEFAULT_LEASE_MS, Protocol, Queryable, Statements } from "./protocol";
import { parseTriggerSource } from "./vocabulary";
import type { Outcome, TriggerSource } from "./vocabulary";

/** Who sent this call and why, as the caller knows it; stored in idem.attempts. */
export interface CallContext {
  triggerSource: TriggerSource;
  traceId?: string | null;
  agentId?: string | null;
}

const contextStore = new AsyncLocalStorage<CallContext>();

/** States the trigger source, trace id and agent id for the guarded calls made inside `fn`. */
export function withCallContext<T>(context: Partial<CallContext>, fn: () => T): T {
  return contextStore.run(normalise(context), fn);
}

export function currentContext(): CallContext {
  return contextStore.getStore() ?? { triggerSource: "initial" };
}

function normalise(context: Partial<CallContext>): CallContext {
  return {
    triggerSource: parseTriggerSource(context.triggerSource ?? "initial"),
    traceId: context.traceId ?? null,
    agentId: context.agentId ?? null,
  };
}

/** One request to a side-effecting tool, as idem.begin needs it. */
export interface ToolCall {
  key: string;
  bizType: string;
  bizId: string;
  tool: string;
  payload: unknown;
  context?: Partial<CallContext>;
  leaseMs?: number;
  /** null: the database hashes the payload. */
  requestHash?: string | null;
  /** The body's answer deadline: past it the body's signal aborts and the outcome is unknown. */
  timeoutMs?: number;
}

/** How a guarded call ended: a response, or the error that says why there is none. */
export class ToolResult<T> {
  constructor(
    readonly key: string,
    /** What begin answered; null when begin could not be reached. */
    readonly outcome: Outcome | null,
    /** This call ran the side effect. */
    readonly executed: boolean,
    readonly response: T | undefined,
    readonly error: errors.IdemError | null,
  ) {}

  get ok(): boolean {
    return this.error === null;
  }

  /** The response, or throws the error. */
  unwrap(): T {
    if (this.error) throw this.error;
    return this.response as T;
  }
}

/** How a tool body's error is reported. */
export type Failure = "final" | "not_sent" | "unknown";

export function defaultClassify(err: unknown): Failure {
  if (err instanceof errors.BusinessFailure) return "final";
  if (err instanceof errors.NotSent) return "not_sent";
  if (typeof err === "object" && err !== null && (err as { code?: unknown }).code === "ECONNREFUSED") return "not_sent";
  // A timeout, or anything else: the request may have reached downstream and done its work.
  return "unknown";
}

// Errors of the database connection itself mean the layer is unreachable: a server SQLSTATE of
// class 08, 53, 57 or 58, a socket error (ECONNREFUSED, ETIMEDOUT, ...), node-postgres's own
// "Connection terminated" / "timeout exceeded when trying to connect" / "not queryable". Anything
// else (a bound, a missing grant, a bug) is a deterministic refusal and is thrown as it is.
function isConnectionError(err: unknown): boolean {
  if (typeof err !== "object" || err === null) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return /^(08|53|57|58)/.test(code);
  if (typeof code === "string" && /^E[A-Z]+$/.test(code)) return true;
  const message = String((err as { message?: unknown }).message ?? "");
  return /Connection terminated|trying to connect|not queryable|connection error/i.test(message);
}

function describe(err: unknown): string {
  if (err instanceof Error) return err.message ? `${err.name}: ${err.message}` : err.name;
  return String(err);
}

export function errorText(payload: unknown): string {
  if (payload === null || payload === undefined) return "the error was not stored";
  if (typeof payload === "string") return payload;
  if (typeof payload === "object") {
    for (const name of ["error", "last_error", "reason", "message"]) {
      const value = (payload as Record<string, unknown>)[name];
      if (typeof value === "string") return value;
    }
  }
  return JSON.stringify(payload);
}

// What the database stores is JSON: a Date becomes its text, a bigint its digits, rather than the
// report failing after the money moved.
function asJson(value: unknown): unknown {
  const text = JSON.stringify(value === undefined ? null : value, (_k, v) => (typeof v === "bigint" ? v.toString() : v));
  return JSON.parse(text);
}

/**
 * The pauses before each new send of a protocol call whose connection broke (a failover, a reset):
 * about 16 s in all, longer than a failover takes. The call may have committed or not; sent again
 * with the same key, token and version, its answer says which.
 */
export const RESEND_PAUSES_MS: readonly number[] = [200, 500, 1000, 2000, 4000, 8000];

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface GuardOptions {
  leaseMs?: number;
  /** Pauses before each new send of a call whose connection broke; [] sends each call once. */
  resendPausesMs?: readonly number[];
  /** Maps a tool body's error to how it is reported; return undefined for the default. */
  classify?: (err: unknown) => Failure | undefined;
  /** How the claim's calls are sent (Protocol's `statements`): "prepared", the default, or "unnamed". */
  statements?: Statements;
}

export type Body<T> = (signal: AbortSignal) => Promise<T> | T;

/** Runs tool calls under the protocol. `db` is a pg.Pool (recommended) or a pg.Client. */
export class Guard {
  readonly protocol: Protocol;
  readonly leaseMs: number;
  readonly resendPausesMs: readonly number[];
  private readonly classify?: (err: unknown) => Failure | undefined;
  private readonly pending = new Set<Promise<void>>();

  constructor(db: Queryable, options: GuardOptions = {}) {
    this.protocol = new Protocol(db, { statements: options.statements });
    this.leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
    this.resendPausesMs = options.resendPausesMs ?? RESEND_PAUSES_MS;
    this.classify = options.classify;
  }

  // The call's answer, sending it again after each pause while its connection breaks; and whether
  // it was sent more than once (then its first send may have committed).
  private async sent<R>(call: () => Promise<R>): Promise<{ answer: R; resent: boolean }> {
    for (let n = 0; ; n++) {
      try {
        return { answer: await call(), resent: n > 0 };
      } catch (err) {
        if (!isConnectionError(err) || n >= this.resendPausesMs.length) throw err;
        await pause(this.resendPausesMs[n]);
      }
    }
  }

  /** Claims `call.key`, runs `body` only if this call owns it, reports what happened. */
  async run<T>(call: ToolCall, body: Body<T>): Promise<ToolResult<T>> {
    const context = normalise(call.context ?? currentContext());
    const where = { key: call.key, tool: call.tool };
    const subject = `${call.tool} for ${call.bizType} ${call.bizId}`;
    const leaseMs = call.leaseMs ?? this.leaseMs;
    let begun: BeginResult;
    let sentAt = 0;
    try {
      ({ answer: begun } = await this.sent(() => {
        sentAt = performance.now();
        return this.protocol.begin({
        key: call.key,
        bizType: call.bizType,
        bizId: call.bizId,
        tool: call.tool,
        triggerSource: context.triggerSource,
        payload: call.payload,
        requestHash: call.requestHash ?? null,
          leaseMs,
          agentId: context.agentId,
          traceId: context.traceId,
        });
      }));
    } catch (err) {
      if (!isConnectionError(err)) throw err;
      const error = new errors.Unavailable(
        `${subject}: the idempotency layer could not claim key ${JSON.stringify(call.key)} (${describe(err)}); ` +
          "nothing was sent, the same call may be retried",
        { ...where, cause: err },
      );
      return new ToolResult<T>(call.key, null, false, undefined, error);
    }
    const tookMs = performance.now() - sentAt;
    if (begun.outcome === "executed" && tookMs >= leaseMs) return this.giveBack<T>(call, begun, tookMs, leaseMs, subject);
    if (begun.outcome === "executed") return this.execute(call, begun, body, subject);
    const error = notExecuted(begun, subject, where);
    const response = error ? undefined : (begun.responsePayload as T);
    return new ToolResult<T>(call.key, begun.outcome, false, response, error);
  }

  // The claim came back after its lease ran out: the body does not run, and the claim is given back
  // by its own token (FAILED, retry allowed: it never went downstream). When that is refused (a
  // person or the sweeper decided first), the record's own answer decides the retry.
  private async giveBack<T>(call: ToolCall, begun: BeginResult, tookMs: number, leaseMs: number, subject: string): Promise<ToolResult<T>> {
    const reason =
      `the claim was acknowledged ${(tookMs / 1000).toFixed(1)}s after it was sent, ` +
      `past its ${leaseMs / 1000}s lease; not sent downstream`;
    try {
      await this.sent(() => this.protocol.fail(call.key, begun.version as number, reason, begun.claimToken, true));
    } catch {
      // Nothing ran: the record's own answer decides a retry.
    }
    const error = new errors.RetryableFailure(`${subject} was not sent: ${reason}. The same call may be retried with the same key`, {
      key: call.key,
      tool: call.tool,
      status: "FAILED",
    });
    return new ToolResult<T>(call.key, "executed", false, undefined, error);
  }

  private async execute<T>(call: ToolCall, begun: BeginResult, body: Body<T>, subject: string): Promise<ToolResult<T>> {
    const claim: Claim = { key: call.key, version: begun.version as number, token: begun.claimToken };
    const where = { key: call.key, tool: call.tool };
    let response: T;
    try {
      response = await runWithDeadline(body, call.timeoutMs);
    } catch (err) {
      const failure = this.classify?.(err) ?? defaultClassify(err);
      const error = await this.reportFailure(claim, failure, describe(err), subject, where, err);
      if (err instanceof DeadlineMissed && error instanceof errors.OutcomeUnknown) this.awaitLateAnswer(claim, err.late);
      return new ToolResult<T>(call.key, "executed", true, undefined, error);
    }

    let report;
    try {
      report = await this.recordAnswer(claim, claim.version, asJson(response));
    } catch (err) {
      const error = new errors.NotRecorded(
        `${subject} ran, but its result could not be recorded (${describe(err)}); do not retry: ` +
          "the record will become UNKNOWN for the reconciler or a person",
        { ...where, cause: err },
        response,
        null,
      );
      return new ToolResult<T>(call.key, "executed", true, response, error);
    }
    if (report.recorded) return new ToolResult<T>(call.key, "executed", true, response, null);
    const error = new errors.NotRecorded(
      `${subject} ran, but the layer refused its result (${report.result}, record now ${report.status ?? "absent"}); do not retry`,
      { ...where, status: report.status },
      response,
      report,
    );
    return new ToolResult<T>(call.key, "executed", true, response, error);
  }

  // complete, and when the lease ran out while downstream answered (the sweeper made the record
  // UNKNOWN) once more at the version the answer carries: the claimant's late answer is still the
  // answer (UNKNOWN -> SUCCESS by the claimant). Never a re-run.
  // A complete sent again answers `conflict` with SUCCESS when its first send committed: recorded.
  private async recordAnswer(claim: Claim, version: number, stored: unknown) {
    let { answer: report, resent } = await this.sent(() => this.protocol.complete(claim.key, version, stored, claim.token));
    if (report.result === "conflict" && report.status === "UNKNOWN" && report.version !== null) {
      const lateVersion = report.version;
      const again = await this.sent(() => this.protocol.complete(claim.key, lateVersion, stored, claim.token));
      report = again.answer;
      resent = resent || again.resent;
    }
    const recorded = report.result === "ok" || (resent && report.result === "conflict" && report.status === "SUCCESS");
    return { ...report, recorded };
  }

  // A body that missed its deadline may still answer: the record is UNKNOWN by then, and the
  // claimant's answer settles it (UNKNOWN -> SUCCESS). A late failure proves nothing the claimant
  // may declare (UNKNOWN -> FAILED is for evidence or a person): the record stays UNKNOWN.
  private awaitLateAnswer(claim: Claim, late: Promise<unknown>): void {
    const pending: Promise<void> = late
      .then((response) => this.recordAnswer(claim, claim.version + 1, asJson(response)))
      .then(
        () => undefined,
        () => undefined,
      )
      .finally(() => this.pending.delete(pending));
    this.pending.add(pending);
  }

  /** Resolves once every late answer still awaited has been recorded (or given up): before pool.end(). */
  async idle(): Promise<void> {
    while (this.pending.size) await Promise.all([...this.pending]);
  }

  private async reportFailure(
    claim: Claim,
    failure: Failure,
    reason: string,
    subject: string,
    where: { key: string; tool: string },
    cause: unknown,
  ): Promise<errors.IdemError> {
    let recorded = false;
    try {
      if (failure === "unknown") {
        const { answer: report } = await this.sent(() => this.protocol.markUnknown(claim.key, claim.version, reason, claim.token));
        // Already UNKNOWN (the sweeper was first, or this report's first send) is the state we asked for.
        recorded = report.result === "ok" || (report.result === "conflict" && report.status === "UNKNOWN");
      } else {
        const { answer: report, resent } = await this.sent(() =>
          this.protocol.fail(claim.key, claim.version, reason, claim.token, failure === "not_sent"),
        );
        recorded = report.result === "ok" || (resent && report.result === "conflict" && report.status === "FAILED");
      }
    } catch (err) {
      reason = `${reason}; reporting it failed: ${describe(err)}`;
    }
    if (failure === "unknown" || !recorded) {
      // Not recorded as a failure: the lease runs out and the record becomes UNKNOWN, the same end
      // as a timeout, so the caller hears the same thing.
      return new errors.OutcomeUnknown(
        `${subject}: the outcome is unknown (${reason}). Do not retry: it may have happened; ` +
          "the reconciler or a person will settle it",
        { ...where, status: "UNKNOWN", cause },
      );
    }
    if (failure === "final") {
      return new errors.FinalFailure(
        `${subject} failed definitively: ${reason}. Do not retry the same request; change the plan`,
        { ...where, status: "FAILED", cause },
        reason,
        false,
      );
    }
    return new errors.RetryableFailure(
      `${subject} was not sent (${reason}); the same call may be retried with the same key`,
      { ...where, status: "FAILED", cause },
    );
  }

  /**
   * Wraps a tool function taking one arguments object (what a model's tool call carries). `bizId`
   * and `attempt` are an argument's name or a function of the arguments; the key is
   * stableKey(bizType, bizId, tool, attempt), never per retry. `payload` picks the request that must
   * repeat exactly (default: all arguments).
   */
  tool<A extends Record<string, unknown>, T>(spec: ToolSpec<A>, fn: (args: A, signal: AbortSignal) => Promise<T> | T): GuardedTool<A, T> {
    const pick = <V>(rule: keyof A | ((args: A) => V) | V | undefined, args: A): unknown =>
      typeof rule === "function" ? (rule as (a: A) => V)(args) : typeof rule === "string" ? args[rule] : rule;
    const callFor = (args: A, context?: Partial<CallContext>): ToolCall => {
      const bizId = String(pick(spec.bizId, args));
      const attempt = Number(pick(spec.attempt ?? 1, args));
      return {
        key: stableKey(spec.bizType, bizId, spec.tool, attempt),
        bizType: spec.bizType,
        bizId,
        tool: spec.tool,
        payload: asJson(spec.payload ? spec.payload(args) : args),
        context: context ?? currentContext(),
        leaseMs: spec.leaseMs,
        timeoutMs: spec.timeoutMs,
      };
    };
    const run = (args: A, context?: Partial<CallContext>) => this.run<T>(callFor(args, context), (signal) => fn(args, signal));
    const guarded = (async (args: A, context?: Partial<CallContext>) => (await run(args, context)).unwrap()) as GuardedTool<A, T>;
    guarded.run = run;
    guarded.callFor = callFor;
    guarded.toolName = spec.tool;
    return guarded;
  }
}

export interface ToolSpec<A> {
  bizType: string;
  bizId: keyof A | ((args: A) => string);
  tool: string;
  attempt?: number | keyof A | ((args: A) => number);
  payload?: (args: A) => unknown;
  leaseMs?: number;
  timeoutMs?: number;
}

/** A tool function under a Guard: calling it resolves to the response or rejects with an IdemError. */
export interface GuardedTool<A, T> {
  (args: A, context?: Partial<CallContext>): Promise<T>;
  run(args: A, context?: Partial<CallContext>): Promise<ToolResult<T>>;
  callFor(args: A, context?: Partial<CallContext>): ToolCall;
  toolName: string;
}

/**
 * The body missed its deadline; `late` is its answer if it still comes. Named as the ResponseTimeout
 * it is, so the record's last_error reads "ResponseTimeout: no answer within ... ms".
 */
class DeadlineMissed extends errors.ResponseTimeout {
  override name = "ResponseTimeout";
  constructor(message: string, readonly late: Promise<unknown>) {
    super(message);
  }
}

async function runWithDeadline<T>(body: Body<T>, timeoutMs: number | undefined): Promise<T> {
  const controller = new AbortController();
  if (timeoutMs === undefined) return await body(controller.signal);
  const running = Promise.resolve().then(() => body(controller.signal));
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const err = new DeadlineMissed(`no answer within ${timeoutMs} ms`, running);
      controller.abort(err);
      reject(err);
    }, timeoutMs);
  });
  try {
    return await Promise.race([running, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

function notExecuted(begun: BeginResult, subject: string, where: { key: string; tool: string }): errors.IdemError | null {
  const status = begun.status;
  const at = { ...where, status };
  switch (begun.outcome) {
    case "replayed": {
      if (status === "SUCCESS") return null;
      const error = errorText(begun.responsePayload);
      return new errors.FinalFailure(
        `${subject} failed before, definitively: ${error}. It will not run again with this request; ` +
          "change the plan (another method, ask the user) instead of retrying",
        at,
        error,
        true,
      );
    }
    case "in_progress": {
      const state = status === "UNKNOWN" ? "its outcome is uncertain (UNKNOWN)" : "it is in progress (PROCESSING)";
      return new errors.InProgress(
        `${subject}: ${state}. Do not retry: it may already have happened; the claimant, the reconciler or a person will settle it`,
        at,
      );
    }
    case "retired":
      return new errors.Retired(
        `${subject}: key ${JSON.stringify(where.key)} was used before and its record retired; it never runs again`,
        at,
      );
    case "rejected":
      return new errors.Rejected(
        `${subject}: refused, the business object already succeeded, is in flight or money moved for it under another key; ` +
          "do not retry with a new key",
        at,
      );
    default:
      return new errors.PayloadMismatch(
        `${subject}: key ${JSON.stringify(where.key)} was used for a different request; the same key must carry the same ` +
          "request (a bug upstream), nothing ran",
        at,
      );
  }
}
