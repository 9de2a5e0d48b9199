"""What the guard costs per wrapped call, against the bare protocol from the same language.

    IDEMWATCH_CLIENT_DSN="host=... dbname=..." python3 bench/overhead.py [CALLS]

Three series over CALLS new keys each (default 10,000), one connection, median and p99 in
microseconds: a bare `SELECT * FROM idem.begin(...)`; bare begin + complete (the least a correct
caller sends); the guarded call with an empty body (begin + complete through Guard.run).
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
from idemwatch.protocol import BEGIN_SQL, COMPLETE_SQL, DEFAULT_LEASE  # noqa: E402


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main(calls: int) -> None:
    dsn = os.environ["IDEMWATCH_CLIENT_DSN"]
    run = uuid.uuid4().hex[:8]
    payload = {"amount_minor": 2990, "currency": "CNY"}
    conn = psycopg.connect(dsn, autocommit=True)
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

    def guarded(i: int) -> None:
        key = f"bench-{run}-g-{i}"
        call = ToolCall(key, "bench", key, "pay", payload, CallContext())
        guard.run(call, lambda: {"ok": True}).unwrap()

    for name, fn in (("bare begin", bare_begin), ("bare begin+complete", bare_begin_complete), ("guarded call", guarded)):
        for i in range(min(500, calls)):  # warm-up: prepared plans, caches
            fn(-1 - i)
        samples = []
        for i in range(calls):
            start = time.perf_counter_ns()
            fn(i)
            samples.append((time.perf_counter_ns() - start) / 1000)
        print(f"python  {name:22s} median {statistics.median(samples):8.1f} us   p99 {percentile(samples, 99):8.1f} us")
    conn.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
