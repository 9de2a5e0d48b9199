"""What the guard costs per wrapped call, against the bare protocol from the same language.

    IDEMWATCH_CLIENT_DSN="host=... dbname=..." python3 bench/overhead.py [CALLS]

Five series over CALLS new keys each (default 10,000), one connection each, median and p99 in
microseconds: a bare `SELECT * FROM idem.begin(...)`; bare begin + complete (the least a correct
caller sends); the same through Protocol as shipped (psycopg prepares a statement it has run five
times) and with nothing prepared (`prepare_threshold` None, what a pooler in transaction mode
leaves); the guarded call with an empty body (begin + complete through Guard.run). The series run in
turn IDEMWATCH_CLIENT_BENCH_ROUNDS times (default 1): on a shared machine a series' figure is read
against the others of its round.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import uuid

import psycopg
from psycopg.types.json import Jsonb

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from idemwatch import CallContext, Guard, ToolCall  # noqa: E402
from idemwatch.protocol import BEGIN_SQL, COMPLETE_SQL, DEFAULT_LEASE, Protocol  # noqa: E402


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main(calls: int, rounds: int) -> None:
    dsn = os.environ["IDEMWATCH_CLIENT_DSN"]
    run = uuid.uuid4().hex[:8]
    payload = {"amount_minor": 2990, "currency": "CNY"}
    conn = psycopg.connect(dsn, autocommit=True)
    unprepared = psycopg.connect(dsn, autocommit=True, prepare_threshold=None)
    guard = Guard(lambda: conn)

    def bare_begin(i: int) -> None:
        key = f"bench-{run}-b-{i}"
        conn.execute(BEGIN_SQL, (key, "bench", key, "pay", None, "initial", Jsonb(payload), DEFAULT_LEASE, None, None)).fetchone()

    def bare_begin_complete(i: int) -> None:
        key = f"bench-{run}-c-{i}"
        row = conn.execute(
            BEGIN_SQL, (key, "bench", key, "pay", None, "initial", Jsonb(payload), DEFAULT_LEASE, None, None)
        ).fetchone()
        conn.execute(COMPLETE_SQL, (key, row[2], Jsonb({"ok": True}), row[4])).fetchone()

    def protocol_round(protocol: Protocol, tag: str):
        def claim(i: int) -> None:
            key = f"bench-{run}-{tag}-{i}"
            begun = protocol.begin(key, "bench", key, "pay", trigger_source="initial", payload=payload)
            protocol.complete(key, begun.version, {"ok": True}, begun.claim_token)

        return claim

    def guarded(i: int) -> None:
        key = f"bench-{run}-g-{i}"
        call = ToolCall(key, "bench", key, "pay", payload, CallContext())
        guard.run(call, lambda: {"ok": True}).unwrap()

    series = (
        ("bare begin", bare_begin),
        ("bare begin+complete", bare_begin_complete),
        ("protocol b+c prepared", protocol_round(Protocol(conn), "p")),
        ("protocol b+c unnamed", protocol_round(Protocol(unprepared), "u")),
        ("guarded call", guarded),
    )
    for round_ in range(1, rounds + 1):
        for name, fn in series:
            for i in range(min(500, calls)):  # warm-up: prepared plans, caches
                fn(-1 - i - round_ * calls)
            samples = []
            for i in range(calls):
                start = time.perf_counter_ns()
                fn(i + round_ * calls * 2)
                samples.append((time.perf_counter_ns() - start) / 1000)
            print(
                f"python {round_} {name:22s} median {statistics.median(samples):8.1f} us"
                f"   p99 {percentile(samples, 99):8.1f} us"
            )
    conn.close()
    unprepared.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000, int(os.environ.get("IDEMWATCH_CLIENT_BENCH_ROUNDS", "1")))
