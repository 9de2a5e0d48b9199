#!/usr/bin/env python3
"""idemwatch-proxy's memory under hostile connection counts, and /metrics throughout:

  1. 10,000 keep-alive connections, each after one request, then idle;
  2. on top of them, 1,000 slow clients each sending a request header a byte a second;
  3. all gone.

At each stage: the proxy's resident memory (VmRSS, and VmHWM, its peak) and the time a fresh
connection takes to get /metrics (the worst of 5). The proxy needs no database here: nothing is
claimed. Printed as a table for docs/benchmarks.md.

  bench/proxy/connections.py PROXY_BINARY [--idle 10000] [--slow 1000] [--slow-seconds 20]
"""

from __future__ import annotations

import argparse
import http.client
import pathlib
import resource
import selectors
import socket
import subprocess
import sys
import tempfile
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def memory(pid: int) -> tuple[float, float]:
    fields = {}
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        fields[name] = value.strip()
    mib = lambda f: int(fields[f].split()[0]) / 1024  # noqa: E731
    return mib("VmRSS"), mib("VmHWM")


def scrape(port: int) -> tuple[float, int]:
    worst, status = 0.0, 0
    for _ in range(5):
        started = time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/metrics")
        res = conn.getresponse()
        res.read()
        status = res.status
        conn.close()
        worst = max(worst, time.monotonic() - started)
    return worst * 1000, status


def gauge(port: int, name: str) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return line.split()[1]
    return "?"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("proxy")
    parser.add_argument("--idle", type=int, default=10_000)
    parser.add_argument("--slow", type=int, default=1_000)
    parser.add_argument("--slow-seconds", type=int, default=20)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < args.idle + args.slow + 100:
        print(f"this shell may open {hard} descriptors; {args.idle + args.slow} connections need more", file=sys.stderr)
        return 1

    work = pathlib.Path(tempfile.mkdtemp(prefix="idemwatch-bench-connections-"))
    port = free_port()
    config = work / "proxy.yml"
    config.write_text(f"""listen: 127.0.0.1:{port}
idle_timeout: 600s
request_timeout: 600s
max_connections: {args.idle + args.slow + 100}
database:
  dsn: "host=127.0.0.1 port=1 dbname=none connect_timeout=1"
routes:
  - name: charge
    path: /charges/{{order_id}}
    upstream: http://127.0.0.1:{free_port()}
    biz_type: payment
    biz_id: path:order_id
""")
    log = open(work / "proxy.log", "w")
    proxy = subprocess.Popen([args.proxy, "--config.file", str(config)], stderr=log)
    rows = []
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

        def stage(name: str) -> None:
            ms, status = scrape(port)
            rss, peak = memory(proxy.pid)
            rows.append((name, gauge(port, "idemwatch_proxy_connections"), rss, peak, ms, status))
            print(f"{name}: {rows[-1][1]} connections, RSS {rss:.1f} MiB (peak {peak:.1f}), /metrics {ms:.1f} ms ({status})",
                  flush=True)

        stage("started")
        idle = []
        request = f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        started = time.monotonic()
        for i in range(args.idle):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(request)
            idle.append(s)
        # Each answered once, then kept alive and idle.
        sel = selectors.DefaultSelector()
        for s in idle:
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
        pending = set(idle)
        while pending and time.monotonic() - started < 300:
            for key, _ in sel.select(timeout=1):
                try:
                    data = key.fileobj.recv(1 << 16)
                except BlockingIOError:
                    continue
                if data and b"\r\n\r\n" in data or not data:
                    sel.unregister(key.fileobj)
                    pending.discard(key.fileobj)
        print(f"{args.idle} keep-alive connections opened and answered in {time.monotonic() - started:.1f} s", flush=True)
        stage(f"{args.idle:,} idle keep-alive")

        slow = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(args.slow)]
        for s in slow:
            s.sendall(b"POST /charges/o-slow HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        for _ in range(args.slow_seconds):
            tick = time.monotonic()
            for s in slow:
                s.sendall(b"a")
            time.sleep(max(0.0, 1 - (time.monotonic() - tick)))
        stage(f"+ {args.slow:,} slow clients ({args.slow_seconds} s, a byte a second)")
        for s in slow + idle:
            s.close()
        time.sleep(2)
        stage("all closed")
    finally:
        proxy.terminate()
        proxy.wait(30)
        log.close()
    print()
    print("| stage | connections | RSS MiB | peak RSS MiB | /metrics worst of 5, ms |")
    print("|---|---|---|---|---|")
    for name, conns, rss, peak, ms, status in rows:
        print(f"| {name} | {conns} | {rss:.1f} | {peak:.1f} | {ms:.1f}{'' if status == 200 else f' ({status})'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
