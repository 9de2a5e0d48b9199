// What a guarded tool call can end in, as error classes, and what a tool body throws to say how its
// side effect failed. Two families reach the caller:
// - DoNotRetry: running the same request again could charge twice or is pointless. Hand
//   `forModel()` back to the model instead of calling the tool again.
// - MayRetry: nothing reached downstream; the same call (same key) may be sent again.
// A tool body throws BusinessFailure (definite: card declined; final), NotSent (certainly never
// reached downstream) or ResponseTimeout (sent, no answer). Anything else it throws is unknown too:
// an error after sending proves nothing about what the downstream did.
import type { ChangeResult } from "./protocol";
import type { RecordStatus } from "./vocabulary";

/**
 * The base of every error here: its `name` is its class's, set once for all of them. A caller's
 * subclass is named for itself, as Python's type(exc).__name__ is.
 */
export class NamedError extends Error {
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

// --- thrown by a tool body ---------------------------------------------------------------------

/** A definite failure from downstream (insufficient balance, card declined): final, not retried. */
export class BusinessFailure extends NamedError {}

/** The request certainly never reached downstream (connection refused before sending). */
export class NotSent extends NamedError {}

/** The request was sent and no answer came: the side effect may or may not have happened. */
export class ResponseTimeout extends NamedError {}

// --- thrown to the caller ----------------------------------------------------------------------

export interface Where {
  key: string;
  tool: string;
  status?: RecordStatus | null;
  cause?: unknown;
}

/** A guarded call that did not produce a response. */
export class IdemError extends NamedError {
  readonly key: string;
  readonly tool: string;
  readonly status: RecordStatus | null;

  constructor(message: string, where: Where) {
    super(message, where.cause === undefined ? undefined : { cause: where.cause });
    this.key = where.key;
    this.tool = where.tool;
    this.status = where.status ?? null;
  }

  /** One sentence to hand back to the model as the tool's result. */
  forModel(): string {
    return this.message;
  }
}

/** Do not send this request again: it would not run, or running it could repeat a side effect. */
export class DoNotRetry extends IdemError {}

/** Nothing reached downstream: the same call, with the same key, may be sent again. */
export class MayRetry extends IdemError {}

/** Another caller holds the record (PROCESSING), or its outcome is unknown (UNKNOWN). */
export class InProgress extends DoNotRetry {}

/** This call's side effect was sent and its answer never came; the record is now UNKNOWN. */
export class OutcomeUnknown extends DoNotRetry {}

/** A definite failure, now or stored from before (replayed FAILED): change the plan, do not retry. */
export class FinalFailure extends DoNotRetry {
  constructor(message: string, where: Where, readonly error: string, readonly replayed: boolean) {
    super(message, where);
  }
}

/** The layer refused the request before anything ran. */
export class Refused extends DoNotRetry {}

/** The key was used and its record since removed by retention: it never runs again. */
export class Retired extends Refused {}

/** The business object already succeeded, is in flight, or money moved for it, under another key. */
export class Rejected extends Refused {}

/** The same key came with a different request: a bug upstream. */
export class PayloadMismatch extends Refused {}

/**
 * The side effect ran (this call owned the record) but its outcome could not be written. `response`
 * is what downstream answered. The record stays with its lease, then becomes UNKNOWN for the
 * reconciler or a person; a retry is never executed.
 */
export class NotRecorded extends DoNotRetry {
  constructor(message: string, where: Where, readonly response: unknown, readonly report: ChangeResult | null) {
    super(message, where);
  }
}

/** The tool body said the request never reached downstream; the record allows a retry. */
export class RetryableFailure extends MayRetry {}

/** The idempotency layer could not be reached to claim the key; nothing was sent downstream. */
export class Unavailable extends MayRetry {}
