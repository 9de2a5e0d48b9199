#!/usr/bin/python3
"""A Stripe itemized balance change report (balance_change_from_activity.itemized) of N lines, the
columns of tests/shared/data/statements/stripe_itemized.csv, shaped like a busy day:

  line i, i % 20:  0..16 a charge (85%), 17 a refund of the charge on line i - 1 (5%),
                   18 a Stripe fee, 19 a payout (10% together).
  a charge:        key ord-<i>-pay, business object order:<i> in payment_metadata; every 20th
                   (i % 20 == 5) carries the business object only (matched by it, not by the key).
  amounts:         500 + (i * 7919) % 99500 minor units; USD (i % 100 < 80), EUR (< 95), else JPY.
  a refund:        half of its charge (at least 1), same key, business object and charge_id.

setup.sql derives the records from the same formulas. Deterministic: the same N gives the same
file, byte for byte.

    generate.py LINES OUT.csv
"""
import sys

HEADER = ("balance_transaction_id,created_utc,available_on_utc,currency,gross,fee,net,"
          "reporting_category,source_id,description,charge_id,payment_intent_id,"
          "customer_facing_amount,payment_method_type,card_brand,"
          "payment_metadata[idempotency_key],payment_metadata[biz_id]\n")
DAY = 1795996800  # 2026-11-30 00:00:00 UTC
BRANDS = ("visa", "mastercard", "amex", "visa", "discover")


def currency(i):
    c = i % 100
    return "usd" if c < 80 else ("eur" if c < 95 else "jpy")


def amount(i):
    return 500 + (i * 7919) % 99500


def money(minor, cur):
    """Minor units as the report writes them: 29.90, -10.00, 1500 (JPY has no decimals)."""
    if cur == "jpy":
        return str(minor)
    sign = "-" if minor < 0 else ""
    minor = abs(minor)
    return f"{sign}{minor // 100}.{minor % 100:02d}"


def stamp(t):
    days, rest = divmod(t - DAY, 86400)
    # Only a few days around the 30th of November are ever needed.
    day = ("2026-11-30", "2026-12-01", "2026-12-02", "2026-12-03", "2026-12-04")[days]
    return f"{day} {rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"


def main():
    n = int(sys.argv[1])
    out = open(sys.argv[2], "w", encoding="utf-8", newline="")
    out.write(HEADER)
    buf = []
    for i in range(1, n + 1):
        t = stamp(DAY + i * 86400 // (n + 1))
        kind = i % 20
        txn = f"txn_3Qb{i:012d}"
        if kind <= 16:  # a charge
            cur = currency(i)
            a = amount(i)
            fee = a * 29 // 1000 + (30 if cur != "jpy" else 0)
            key = "" if kind == 5 else f"ord-{i}-pay"
            desc = f'"Order {i}, {i % 5 + 1} items"' if i % 50 == 0 else f"Order {i}"
            ch = f"ch_3Qb{i:012d}"
            buf.append(f"{txn},{t},{stamp(DAY + 2 * 86400)},{cur},{money(a, cur)},"
                       f"{money(fee, cur)},{money(a - fee, cur)},charge,{ch},{desc},{ch},"
                       f"pi_3Qb{i:012d},{money(a, cur)},card,{BRANDS[i % 5]},{key},order:{i}\n")
        elif kind == 17:  # a refund of line i - 1's charge
            c = i - 1
            cur = currency(c)
            a = max(amount(c) // 2, 1)
            key = "" if c % 20 == 5 else f"ord-{c}-pay"
            buf.append(f"{txn},{t},{t},{cur},{money(-a, cur)},{money(0, cur)},{money(-a, cur)},"
                       f"refund,re_3Qb{i:012d},REFUND FOR CHARGE (Order {c}),ch_3Qb{c:012d},"
                       f"pi_3Qb{c:012d},{money(-a, cur)},card,{BRANDS[c % 5]},{key},order:{c}\n")
        elif kind == 18:  # a Stripe fee
            buf.append(f"{txn},{t},{t},usd,-2.00,0.00,-2.00,fee,ft_3Qb{i:012d},"
                       f"Radar for Fraud Teams ({t[:10]}),,,,,,,\n")
        else:  # a payout
            a = 100000 + i % 90000
            buf.append(f"{txn},{t},{t},usd,{money(-a, 'usd')},0.00,{money(-a, 'usd')},payout,"
                       f"po_3Qb{i:012d},STRIPE PAYOUT,,,,,,,\n")
        if len(buf) >= 10000:
            out.write("".join(buf))
            buf.clear()
    out.write("".join(buf))
    out.close()


if __name__ == "__main__":
    main()
