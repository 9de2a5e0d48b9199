"""The idempotency key where each gateway keeps it, so that the gateway's own word names the record.

A statement line or a callback is matched to its record first by the key the client gave the
gateway, exactly (docs/contract/schema.md, "The gateway's evidence"): Stripe's payment metadata
(`payment_metadata[idempotency_key]` in the itemized balance report), Adyen's merchant reference
(the settlement details report's "Merchant Reference", a refund's modification merchant
reference), SEPA's `EndToEndId` (camt.053 / camt.054). Each helper gives the value to send with the
request and refuses a key the gateway could not keep whole: a key it shortened or rewrote would
name no record, and the evidence would only be matched by weaker references, or by a person.

Give the gateway the key the record was claimed under (`stable_key`, or `compact_key` for SEPA's
35 characters), never one minted for the request.
"""

from __future__ import annotations

import re
from typing import Optional

from .keys import MAX_KEY_LENGTH

# The metadata keys the Stripe statement reader looks for (payment_metadata[...]).
STRIPE_KEY_METADATA = "idempotency_key"
STRIPE_BIZ_ID_METADATA = "biz_id"
STRIPE_METADATA_VALUE_LENGTH = 500
ADYEN_MERCHANT_REFERENCE_LENGTH = 80
SEPA_END_TO_END_ID_LENGTH = 35
SEPA_CHARACTERS = "a-z A-Z 0-9 / - ? : ( ) . , ' + and space"
_SEPA_CHARACTER = re.compile(r"[A-Za-z0-9/\-?:().,'+ ]")
# What a payer writes when it gives no EndToEndId: the camt reader takes it for none.
_SEPA_NONE = "NOTPROVIDED"

_DERIVE = (
    "claim the record under a key that fits, e.g. idemwatch.compact_key(biz_type, biz_id, tool, attempt), "
    "and give the gateway that same key"
)


def _checked(helper: str, key: str) -> str:
    if not isinstance(key, str) or not key.strip():
        raise ValueError(f"{helper}: the idempotency key must be a non-blank string, got {key!r}")
    if len(key) > MAX_KEY_LENGTH:
        raise ValueError(f"{helper}: {len(key)} characters is no idempotency key (the schema's limit is {MAX_KEY_LENGTH})")
    return key


def stripe_metadata(key: str, biz_id: Optional[str] = None) -> dict[str, str]:
    """Stripe `metadata` for the PaymentIntent or charge (merge it with your own): the key under
    `idempotency_key`, and the business object under `biz_id` when given. The balance report gives it
    back in its `payment_metadata[...]` columns (a refund's line too), the PaymentIntent's events in
    their object's `metadata`.
    Send the same key as the request's `Idempotency-Key` header too, so Stripe itself runs it once."""
    metadata = {STRIPE_KEY_METADATA: _checked("stripe_metadata", key)}
    if biz_id is not None:
        if not isinstance(biz_id, str) or not biz_id.strip():
            raise ValueError(f"stripe_metadata: biz_id must be a non-blank string or None, got {biz_id!r}")
        if len(biz_id) > STRIPE_METADATA_VALUE_LENGTH:
            raise ValueError(
                f"stripe_metadata: biz_id has {len(biz_id)} characters; Stripe keeps at most"
                f" {STRIPE_METADATA_VALUE_LENGTH} in a metadata value"
            )
        metadata[STRIPE_BIZ_ID_METADATA] = biz_id
    return metadata


def adyen_merchant_reference(key: str) -> str:
    """Adyen's `merchantReference` (of the payment, or of the refund's modification): the key as
    it is. Adyen keeps at most 80 characters; a longer key is refused, never cut."""
    _checked("adyen_merchant_reference", key)
    if len(key) > ADYEN_MERCHANT_REFERENCE_LENGTH:
        raise ValueError(
            f"adyen_merchant_reference: the key has {len(key)} characters and Adyen's merchantReference"
            f" takes at most {ADYEN_MERCHANT_REFERENCE_LENGTH}: {_DERIVE}"
        )
    return key


def _sepa_refusal(key: str) -> Optional[str]:
    if len(key) > SEPA_END_TO_END_ID_LENGTH:
        return f"it has {len(key)} characters and an EndToEndId takes at most {SEPA_END_TO_END_ID_LENGTH}"
    outside = sorted({c for c in key if not _SEPA_CHARACTER.fullmatch(c)})
    if outside:
        shown = " ".join(repr(c) for c in outside)
        return f"{shown} {'is' if len(outside) == 1 else 'are'} outside SEPA's character set ({SEPA_CHARACTERS})"
    if key.startswith("/") or key.endswith("/"):
        return "an EndToEndId must not start or end with '/'"
    if "//" in key:
        return "an EndToEndId must not contain '//'"
    if key == _SEPA_NONE:
        return f"{_SEPA_NONE} is what a payer writes when it gives no EndToEndId"
    return None


def sepa_end_to_end_id(key: str) -> str:
    """The `EndToEndId` of a SEPA credit transfer (pain.001 `PmtId/EndToEndId`): the key as it is,
    which the bank carries to both sides' camt.053 / camt.054. A key that does not fit (35
    characters of SEPA's set, no '/' first or last, no '//') is refused, never rewritten."""
    _checked("sepa_end_to_end_id", key)
    why = _sepa_refusal(key)
    if why is not None:
        raise ValueError(f"sepa_end_to_end_id: {key!r} cannot be a SEPA EndToEndId: {why}; {_DERIVE}")
    return key
