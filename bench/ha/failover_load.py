#!/usr/bin/env python3
"""Claims under failover: WORKERS threads each claim and complete fresh keys (idem.begin, then
idem.complete) through the read-write port of a cluster made by scripts/ha, while the leader's
postmaster is killed with SIGKILL FAILOVERS times. Prints, per failover, the time from the kill to
the first claim committed on the new leader and the calls that failed meanwhile, by error; at the
end, how many claims were acknowledged and how many of them the final leader lacks (the goal: 0).

  failover_load.py --ha-dir DIR --dsn DSN [--workers 8] [--failovers 3] [--gap 15]
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import re
import signal
import sys
import threading
import time

import psycopg

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts" / "lib"))
import ha_nodes  # noqa: E402  (scripts/lib/ha_nodes.py)


class Load:
    def __init__(self, dsn: str, workers: int):
        self.dsn = dsn
        self.lock = threading.Lock()
        self.acknowledged: list[str] = []
        self.errors: collections.Counter = collections.Counter()
        # When each acknowledged claim was sent: one sent after the kill committed on the new
        # leader (an answer read after the kill may have left the old one before it).
        self.commits: list[float] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.work, args=(i,), daemon=True) for i in range(workers)]

    def work(self, n: int) -> None:
        conn = None
        i = 0
        while not self.stop.is_set():
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=2)
                    conn.execute("SET statement_timeout = '5s'")
                i += 1
                key = f"ha-{n}-{os.getpid()}-{i}"
                sent = time.monotonic()
                (token,) = conn.execute(
                    "SELECT claim_token FROM idem.begin(%s, 'payment', %s, 'pay', NULL, 'initial', "
                    "'{\"amount_minor\": 100}')", (key, "o-" + key)).fetchone()
                with self.lock:
                    self.acknowledged.append(key)
                    self.commits.append(sent)
                conn.execute("SELECT * FROM idem.complete(%s, 1, '{}', %s)", (key, token))
            except psycopg.Error as e:
                with self.lock:
                    self.errors[re.sub(r"\d+", "N", str(e).splitlines()[0])[:90]] += 1
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.05)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ha-dir", required=True)
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--failovers", type=int, default=3)
    ap.add_argument("--gap", type=float, default=15, help="seconds between failovers")
    args = ap.parse_args()
    ha_dir = pathlib.Path(args.ha_dir)
    ports = ha_nodes.ports(ha_dir)
    load = Load(args.dsn, args.workers)
    for t in load.threads:
        t.start()
    time.sleep(args.gap)
    print(f"{'failover':<10}{'kill to first claim':>22}{'calls failed':>14}  errors")
    for f in range(args.failovers):
        old = ha_nodes.leader(ports)
        pid = int((ha_dir / old / "data" / "postmaster.pid").read_text().split()[0])
        with load.lock:
            errors_before = sum(load.errors.values())
            kinds_before = collections.Counter(load.errors)
        victims = ha_nodes.postmaster_and_children(pid)
        killed = time.monotonic()
        for victim in victims:
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                pass
        while True:
            time.sleep(0.1)
            with load.lock:
                after = [t for t in load.commits if t > killed]
            if after or time.monotonic() - killed > 120:
                break
        first = min(after) - killed if after else float("nan")
        time.sleep(args.gap)
        with load.lock:
            failed = sum(load.errors.values()) - errors_before
            kinds = load.errors - kinds_before
        print(f"{old + ' → ' + str(ha_nodes.leader(ports)):<10}{first:>20.1f} s{failed:>14}  "
              + "; ".join(f"{n}× {k}" for k, n in kinds.most_common(3)))
    load.stop.set()
    for t in load.threads:
        t.join(timeout=10)
    with psycopg.connect(args.dsn, autocommit=True) as c:
        keys = load.acknowledged
        found = c.execute("SELECT count(*) FROM idem.records WHERE idempotency_key = ANY(%s)",
                          (keys,)).fetchone()[0]
    print(f"claims acknowledged: {len(keys)}; missing on the final leader: {len(keys) - found}")
    return 0 if found == len(keys) else 1


if __name__ == "__main__":
    raise SystemExit(main())
