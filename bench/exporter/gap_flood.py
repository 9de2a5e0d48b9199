#!/usr/bin/env python3
"""A gap flood against the exporter's incremental reader, measured.

A duplicate DEBIT is held open in a transaction (its id taken, its row not yet visible: a gap to
the reader). Then a writer burns ids in a flood: each burnt id sits between two committed ledger
lines, so every one is a gap of its own, far more of them than --max-tracked-gaps. Then the
duplicate commits. Each exporter named runs against the same database through the same flood, so
the figures sit side by side: whether the duplicate was ever counted and how long after its commit,
the fund-flow counters against SQL (each exporter starts afresh per round and counts what the
round writes), and what the reader reported (open gaps, deferred reads, its memory).

    gap_flood.py DSN EXPORTER [--baseline OTHER_EXPORTER] [--floods 0,5000,50000] [--max-gaps 1000]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

import psycopg


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"(\S+) (\S+)$", line)
        if m:
            values[m.group(1)] = float(m.group(2))
    return values


def total(values: dict[str, float], name: str, table: str | None = None) -> float:
    out = 0.0
    for key, v in values.items():
        if key == name or key.startswith(name + "{"):
            if table is None or f'table="{table}"' in key:
                out += v
    return out


class Exporter:
    def __init__(self, label: str, binary: str, dsn: str, max_gaps: int) -> None:
        self.label, self.port = label, free_port()
        self.process = subprocess.Popen(
            [binary, "--db.dsn", dsn, "--web.listen-address", f"127.0.0.1:{self.port}",
             "--collect-interval", "200ms", "--max-tracked-gaps", str(max_gaps), "--log.level", "error"])
        deadline = time.monotonic() + 20
        while True:
            try:
                if scrape(self.port).get("idempotency_exporter_db_up") == 1.0:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"{binary} did not come up")
            time.sleep(0.2)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)


BURN = """
DO $$ BEGIN
  PERFORM idem.record_fund_flow('payment', 'flood', 'DEBIT', 1, 'CNY', %(ref)s, NULL);
  RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'burnt';
EXCEPTION WHEN raise_exception THEN NULL;
END $$"""


def line(conn: psycopg.Connection, obj: str, ref: str) -> None:
    conn.execute("SELECT idem.record_fund_flow('payment', %s, 'DEBIT', 100, 'CNY', %s, NULL)", (obj, ref))


def ledger_counts(conn: psycopg.Connection) -> tuple[int, int]:
    return conn.execute(
        "SELECT count(*), count(duplicate_of) FROM idem.fund_flows").fetchone()  # type: ignore[return-value]


def run(dsn: str, exporters: list[tuple[str, str]], flood: int, max_gaps: int, round_no: int) -> None:
    # An exporter counts the rows written after it started (what was there before touches no
    # counter), so each round compares against what the round wrote.
    with psycopg.connect(dsn, autocommit=True) as conn:
        flows_before, dups_before = ledger_counts(conn)
    running = [Exporter(label, binary, dsn, max_gaps) for label, binary in exporters]
    try:
        with psycopg.connect(dsn, autocommit=True) as writer, psycopg.connect(dsn) as holder:
            tag = f"{round_no}-{time.time_ns()}"  # references of this run alone
            line(writer, f"o{tag}", f"first-{tag}")
            line(holder, f"o{tag}", f"dup-{tag}")  # the duplicate, uncommitted: a gap
            started = time.monotonic()
            # A string literal per call: DO takes no parameters.
            for i in range(flood):
                writer.execute(BURN.replace("%(ref)s", f"'burn-{tag}-{i}'"))
                line(writer, f"f{tag}-{i}", f"kept-{tag}-{i}")
            flood_seconds = time.monotonic() - started
            time.sleep(2)  # every exporter has met the flood
            holder.commit()
            committed = time.monotonic()
            sql_flows, sql_dups = ledger_counts(writer)
            sql_flows, sql_dups = sql_flows - flows_before, sql_dups - dups_before
        counted_after: dict[str, float | None] = {e.label: None for e in running}
        deadline = committed + 30
        while time.monotonic() < deadline and any(v is None for v in counted_after.values()):
            for e in running:
                if counted_after[e.label] is None:
                    s = scrape(e.port)
                    if total(s, "idempotency_duplicate_fund_flows_total") >= sql_dups and \
                            total(s, "idempotency_fund_flows_total") >= sql_flows:
                        counted_after[e.label] = time.monotonic() - committed
            time.sleep(0.1)
        for e in running:
            s = scrape(e.port)
            rss_kib = 0
            with open(f"/proc/{e.process.pid}/status") as status:
                for row in status:
                    if row.startswith("VmRSS:"):
                        rss_kib = int(row.split()[1])
            after = counted_after[e.label]
            print(f"{e.label:>9} {flood:>7} {flood_seconds:>8.1f} "
                  f"{'never' if after is None else f'{after:.1f} s':>10} "
                  f"{int(total(s, 'idempotency_duplicate_fund_flows_total'))}/{sql_dups:<5} "
                  f"{int(total(s, 'idempotency_fund_flows_total'))}/{sql_flows:<7} "
                  f"{int(total(s, 'idempotency_exporter_open_gaps', 'fund_flows')):>6} "
                  f"{int(total(s, 'idempotency_exporter_reads_deferred_total', 'fund_flows')):>8} "
                  f"{rss_kib / 1024:>7.1f}", flush=True)
    finally:
        for e in running:
            e.stop()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dsn")
    parser.add_argument("exporter")
    parser.add_argument("--baseline", help="another exporter binary, run against the same flood")
    parser.add_argument("--floods", default="0,5000,50000", help="ids burnt, one round each")
    parser.add_argument("--max-gaps", type=int, default=1000, help="--max-tracked-gaps of every exporter")
    args = parser.parse_args()
    exporters = [("this", args.exporter)] + ([("baseline", args.baseline)] if args.baseline else [])
    print(f"machine: {os.cpu_count()} cores; {time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}; "
          f"--max-tracked-gaps {args.max_gaps}, --collect-interval 200ms; every burnt id between two "
          f"committed lines (one gap each)")
    print(f"{'exporter':>9} {'burnt':>7} {'flood s':>8} {'counted':>10} {'dups':<11} {'flows':<15}"
          f"{'gaps':>6} {'deferred':>8} {'RSS MiB':>7}")
    for n, flood in enumerate(int(x) for x in args.floods.split(",")):
        run(args.dsn, exporters, flood, args.max_gaps, n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
