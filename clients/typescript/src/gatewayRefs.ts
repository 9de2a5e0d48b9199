// The idempotency key where each gateway keeps it, so that the gateway's own word names the record.
//
// A statement line or a callback is matched to its record first by the key the client gave the
// gateway, exactly (docs/contract/schema.md, "The gateway's evidence"): Stripe's payment metadata
// (`payment_metadata[idempotency_key]` in the itemized balance report), Adyen's merchant reference
// (the settlement details report's "Merchant Reference", a refund's modification merchant
// reference), SEPA's `EndToEndId` (camt.053 / camt.054). Each helper gives the value to send with
// the request and refuses a key the gateway could not keep whole: a key it shortened or rewrote
// would name no record, and the evidence would only be matched by weaker references, or by a person.
//
// Give the gateway the key the record was claimed under (`stableKey`, or `compactKey` for SEPA's 35
// characters), never one minted for the request. The same rules and messages as the Python client.
import { MAX_KEY_LENGTH } from "./keys";

/** The metadata keys the Stripe statement reader looks for (payment_metadata[...]). */
export const STRIPE_KEY_METADATA = "idempotency_key";
export const STRIPE_BIZ_ID_METADATA = "biz_id";
export const STRIPE_METADATA_VALUE_LENGTH = 500;
export const ADYEN_MERCHANT_REFERENCE_LENGTH = 80;
export const SEPA_END_TO_END_ID_LENGTH = 35;
export const SEPA_CHARACTERS = "a-z A-Z 0-9 / - ? : ( ) . , ' + and space";
const SEPA_CHARACTER = /^[A-Za-z0-9/\-?:().,'+ ]$/;
// What a payer writes when it gives no EndToEndId: the camt reader takes it for none.
const SEPA_NONE = "NOTPROVIDED";

const DERIVE =
  "claim the record under a key that fits, e.g. compactKey(bizType, bizId, tool, attempt), and give the gateway that same key";

/** Characters as the schema and the Python client count them: code points, not UTF-16 units. */
function chars(text: string): string[] {
  return Array.from(text);
}

function checked(helper: string, key: unknown): string {
  if (typeof key !== "string" || key.trim() === "") {
    throw new TypeError(`${helper}: the idempotency key must be a non-blank string, got ${JSON.stringify(key)}`);
  }
  const length = chars(key).length;
  if (length > MAX_KEY_LENGTH) {
    throw new TypeError(`${helper}: ${length} characters is no idempotency key (the schema's limit is ${MAX_KEY_LENGTH})`);
  }
  return key;
}

/**
 * Stripe `metadata` for the PaymentIntent or charge (merge it with your own): the key under
 * `idempotency_key`, and the business object under `biz_id` when given. The balance report gives it
 * back in its `payment_metadata[...]` columns (a refund's line too), the PaymentIntent's events in
 * their object's `metadata`.
 * Send the same key as the request's `Idempotency-Key` header too, so Stripe itself runs it once.
 */
export function stripeMetadata(key: string, bizId?: string | null): Record<string, string> {
  const metadata: Record<string, string> = { [STRIPE_KEY_METADATA]: checked("stripeMetadata", key) };
  if (bizId !== undefined && bizId !== null) {
    if (typeof bizId !== "string" || bizId.trim() === "") {
      throw new TypeError(`stripeMetadata: bizId must be a non-blank string or null, got ${JSON.stringify(bizId)}`);
    }
    const length = chars(bizId).length;
    if (length > STRIPE_METADATA_VALUE_LENGTH) {
      throw new TypeError(
        `stripeMetadata: bizId has ${length} characters; Stripe keeps at most ${STRIPE_METADATA_VALUE_LENGTH} in a metadata value`,
      );
    }
    metadata[STRIPE_BIZ_ID_METADATA] = bizId;
  }
  return metadata;
}

/**
 * Adyen's `merchantReference` (of the payment, or of the refund's modification): the key as it is.
 * Adyen keeps at most 80 characters; a longer key is refused, never cut.
 */
export function adyenMerchantReference(key: string): string {
  checked("adyenMerchantReference", key);
  const length = chars(key).length;
  if (length > ADYEN_MERCHANT_REFERENCE_LENGTH) {
    throw new TypeError(
      `adyenMerchantReference: the key has ${length} characters and Adyen's merchantReference takes at most ${ADYEN_MERCHANT_REFERENCE_LENGTH}: ${DERIVE}`,
    );
  }
  return key;
}

function sepaRefusal(key: string): string | null {
  const all = chars(key);
  if (all.length > SEPA_END_TO_END_ID_LENGTH) {
    return `it has ${all.length} characters and an EndToEndId takes at most ${SEPA_END_TO_END_ID_LENGTH}`;
  }
  const outside = [...new Set(all.filter((c) => !SEPA_CHARACTER.test(c)))].sort();
  if (outside.length) {
    const shown = outside.map((c) => `'${c}'`).join(" ");
    return `${shown} ${outside.length === 1 ? "is" : "are"} outside SEPA's character set (${SEPA_CHARACTERS})`;
  }
  if (key.startsWith("/") || key.endsWith("/")) return "an EndToEndId must not start or end with '/'";
  if (key.includes("//")) return "an EndToEndId must not contain '//'";
  if (key === SEPA_NONE) return `${SEPA_NONE} is what a payer writes when it gives no EndToEndId`;
  return null;
}

/**
 * The `EndToEndId` of a SEPA credit transfer (pain.001 `PmtId/EndToEndId`): the key as it is, which
 * the bank carries to both sides' camt.053 / camt.054. A key that does not fit (35 characters of
 * SEPA's set, no '/' first or last, no '//') is refused, never rewritten.
 */
export function sepaEndToEndId(key: string): string {
  checked("sepaEndToEndId", key);
  const why = sepaRefusal(key);
  if (why !== null) {
    throw new TypeError(`sepaEndToEndId: ${JSON.stringify(key)} cannot be a SEPA EndToEndId: ${why}; ${DERIVE}`);
  }
  return key;
}
