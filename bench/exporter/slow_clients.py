#!/usr/bin/env python3
"""The exporter's web door under hostile clients, measured.

The exporter serves TLS with basic auth (bcrypt cost 10) and a rate limit. From 127.0.0.2, N
connections are held open that never finish their TLS handshake, or finish it and never finish
their request head (reopened as the door drops them), and anonymous clients send requests as fast
as they are answered. From 127.0.0.1, an authorised scraper (its login remembered after the first
scrape) measures each scrape's latency. Printed, for each load in one run: the scrape's p50, p99 and
max, how many scrapes failed, how many were answered 429, and what the door counted.

    slow_clients.py EXPORTER DSN [--baseline OTHER_EXPORTER] [--loads quiet,0,300,1000] [--scrapes 200]

With --baseline, the other build (an earlier release, say) runs the same loads in the same run, row
by row beside this one, since the machine's noise is the same for both only then.
"""

from __future__ import annotations

import argparse
import base64
import multiprocessing
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import crypt  # libxcrypt's bcrypt, as htpasswd makes it
import os
import pathlib
import re
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time

USER, PASSWORD = "prometheus", "s3cret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def https_get(port: int, path: str, auth: bool, context: ssl.SSLContext, source: str = "127.0.0.1",
              timeout: float = 30.0) -> int:
    try:
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0))
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            head = f"GET {path} HTTP/1.1\r\nHost: localhost\r\n"
            if auth:
                token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
                head += f"Authorization: Basic {token}\r\n"
            tls.sendall((head + "\r\n").encode())
            answer = b""
            while b"\r\n" not in answer:
                chunk = tls.recv(4096)
                if not chunk:
                    break
                answer += chunk
            while True:  # drain, so the status is the whole answer's
                chunk = tls.recv(65536)
                if not chunk:
                    break
            m = re.match(rb"HTTP/1\.1 (\d{3})", answer)
            return int(m.group(1)) if m else 0
    except (OSError, ssl.SSLError):
        return 0


class Load:
    """Hostile clients from 127.0.0.2 until stopped, in processes of their own.

    The scraper measures from this process: were the hostile threads in it too, a scrape would
    wait for the interpreter's lock behind a thousand of them and the figure would be Python's."""

    PROCESSES = 4

    def __init__(self, port: int, slow: int, anonymous: int, cafile: str):
        self.stop = multiprocessing.Event()
        share = lambda n, i: n // self.PROCESSES + (i < n % self.PROCESSES)
        self.processes = [
            multiprocessing.Process(target=_hostile, daemon=True,
                                    args=(port, share(slow, i), share(anonymous, i), cafile, self.stop))
            for i in range(self.PROCESSES)]

    def start(self) -> None:
        for p in self.processes:
            p.start()

    def close(self) -> None:
        self.stop.set()
        for p in self.processes:
            p.join(timeout=15)
            if p.is_alive():
                p.kill()


def _hostile(port: int, slow: int, anonymous: int, cafile: str, stop) -> None:
    context = ssl.create_default_context(cafile=cafile)

    def connect() -> socket.socket | None:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=5, source_address=("127.0.0.2", 0))
        except OSError:
            time.sleep(0.05)
            return None

    def silent() -> None:
        """Connects and sends nothing: the TLS handshake never starts. Reconnects 50 ms after a drop."""
        while not stop.is_set():
            s = connect()
            if s is None:
                continue
            s.settimeout(0.5)
            while not stop.is_set():
                try:
                    if s.recv(1) == b"":
                        break
                except socket.timeout:
                    continue
                except OSError:
                    break
            s.close()
            time.sleep(0.05)

    def half_head() -> None:
        """Finishes the handshake, sends half a request head, and waits. Reconnects after a drop."""
        while not stop.is_set():
            s = connect()
            if s is None:
                continue
            try:
                with context.wrap_socket(s, server_hostname="localhost") as tls:
                    tls.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n")
                    tls.settimeout(0.5)
                    while not stop.is_set():
                        try:
                            if tls.recv(1) == b"":
                                break
                        except socket.timeout:
                            continue
            except (OSError, ssl.SSLError):
                pass
            time.sleep(0.05)

    def anonymous_client() -> None:
        """Requests without a login, as fast as they are answered (401s)."""
        while not stop.is_set():
            https_get(port, "/metrics", False, context, source="127.0.0.2", timeout=5)

    threads = [threading.Thread(target=silent, daemon=True) for _ in range(slow // 2)]
    threads += [threading.Thread(target=half_head, daemon=True) for _ in range(slow - slow // 2)]
    threads += [threading.Thread(target=anonymous_client, daemon=True) for _ in range(anonymous)]
    for t in threads:
        t.start()
    stop.wait()


def door_counts(port: int, context: ssl.SSLContext) -> str:
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    with context.wrap_socket(raw, server_hostname="localhost") as tls:
        token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        tls.sendall(f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {token}\r\n\r\n".encode())
        text = b""
        while True:
            chunk = tls.recv(65536)
            if not chunk:
                break
            text += chunk
    lines = [l for l in text.decode().splitlines() if l.startswith("idempotency_exporter_http_")]
    return ", ".join(l.replace("idempotency_exporter_http_", "") for l in lines)


def measure(binary: str, slow: int, anonymous: int, args: argparse.Namespace, work: pathlib.Path,
            context: ssl.SSLContext) -> str:
    """One exporter under one load: the authorised scrapes' latency and what the door counted."""
    port = free_port()
    exporter = subprocess.Popen([binary, "--db.dsn", args.dsn, "--web.listen-address", f"127.0.0.1:{port}",
                                 "--web.config.file", str(work / "web.yml"), "--log.level", "error"])
    try:
        deadline = time.monotonic() + 20
        while https_get(port, "/metrics", True, context) != 200:
            if time.monotonic() > deadline:
                raise SystemExit(f"{binary} did not answer")
            time.sleep(0.2)
        load = Load(port, slow, anonymous, str(work / "cert.pem"))
        load.start()
        time.sleep(5 if slow or anonymous else 0.2)  # the load takes hold
        latencies, failed, limited = [], 0, 0
        until = time.monotonic() + args.seconds
        for _ in range(args.scrapes):
            begin = time.monotonic()
            status = https_get(port, "/metrics", True, context, timeout=args.scrape_timeout)
            latencies.append((time.monotonic() - begin) * 1000)
            failed += status != 200
            limited += status == 429
            if failed - limited >= 10 or time.monotonic() > until:  # a door this shut says enough
                break
            time.sleep(0.02)
        try:
            counted = door_counts(port, context) if slow or anonymous else ""
        except (OSError, ssl.SSLError) as e:
            counted = f"(no door counts: {e})"
        if len(latencies) < args.scrapes:
            counted = f"stopped after {len(latencies)} scrapes ({args.seconds:.0f} s or 10 failed); " + counted
        load.close()
        latencies.sort()
        p50 = statistics.median(latencies)
        p99 = latencies[max(0, int(len(latencies) * 0.99) - 1)]
        return f"{p50:>8.1f} {p99:>8.1f} {latencies[-1]:>8.1f} {failed:>7} {limited:>5}  {counted}"
    finally:
        exporter.terminate()
        exporter.wait(timeout=20)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("exporter")
    parser.add_argument("dsn")
    parser.add_argument("--loads", default="quiet,0,300,1000",
                        help="slow connections held beside the anonymous clients, per run; quiet: no load at all")
    parser.add_argument("--anonymous", type=int, default=8, help="anonymous clients beside them")
    parser.add_argument("--scrapes", type=int, default=200)
    parser.add_argument("--baseline", help="another exporter binary, measured beside this one")
    parser.add_argument("--seconds", type=float, default=60.0, help="at most this long scraping under one load")
    parser.add_argument("--scrape-timeout", type=float, default=30.0, help="seconds before a scrape counts as failed")
    args = parser.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="idemwatch-door-"))
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", work / "key.pem", "-out", work / "cert.pem", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost"], check=True, capture_output=True)
    hashed = crypt.crypt(PASSWORD, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 10))
    (work / "web.yml").write_text(
        f"tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
        f"basic_auth_users:\n  {USER}: '{hashed}'\n"
        f"rate_limit: {{interval: 10ms, burst: 20}}\n")
    context = ssl.create_default_context(cafile=str(work / "cert.pem"))
    print(f"machine: {os.cpu_count()} cores; {time.strftime('%Y-%m-%d', time.gmtime())}; "
          f"TLS + basic auth (bcrypt cost 10) + rate limit 1 per 10ms, burst 20; "
          f"{args.anonymous} anonymous clients beside the slow ones")
    print(f"{'build':>8} {'slow':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'failed':>7} {'429':>5}  door")
    builds = [("this", args.exporter)] + ([("baseline", args.baseline)] if args.baseline else [])
    for load in args.loads.split(","):
        slow, anonymous = (0, 0) if load == "quiet" else (int(load), args.anonymous)
        for build, binary in builds:
            print(f"{build:>8} {load:>6} " + measure(binary, slow, anonymous, args, work, context), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
