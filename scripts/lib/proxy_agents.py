#!/usr/bin/env python3
"""The demo's agents behind idemwatch-proxy: a local charging tool (the upstream) and agents that
call it only through the proxy, the way a team that does not touch its tools deploys it.

  proxy_agents.py --proxy http://127.0.0.1:8480 --upstream-port PORT [--rate 2] [--agents 4]
                  [--lost-answers 0.05] [--slow-answers 0.02]

The tool charges an order per POST /charges/ORDER and, at the given rates, loses its answer after
charging (the connection closed) or answers after the proxy's upstream timeout. Each agent sends
one charge per operation with an Idempotency-Key and retries as agent runtimes do: the framework
after a 5xx or a lost connection, the model after a refusal, the HTTP client at once; the proxy
decides what each retry gets. Every minute the log says how many orders were charged how many
times: an order charged twice would be the bug this product exists for.
"""

from __future__ import annotations

import argparse
import collections
import http.client
import http.server
import json
import random
import socket
import threading
import time
import urllib.parse
import uuid


class Tool(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, lost: float, slow: float) -> None:
        self.charges: collections.Counter = collections.Counter()
        self.lock = threading.Lock()
        self.lost, self.slow = lost, slow
        super().__init__(("127.0.0.1", port), ToolHandler)

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # an answer the proxy gave up on


class ToolHandler(http.server.BaseHTTPRequestHandler):
    server: Tool

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 (the handler's API)
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        order = self.path.rsplit("/", 1)[-1]
        with self.server.lock:
            self.server.charges[order] += 1
            n = self.server.charges[order]
        fate = random.random()
        if fate < self.server.lost:
            self.connection.shutdown(socket.SHUT_RDWR)  # charged; the answer is lost
            return
        if fate < self.server.lost + self.server.slow:
            time.sleep(12)  # past the route's upstream timeout
        answer = json.dumps({"order": order, "charge": f"ch_{order}_{n}",
                             "amount_minor": body.get("amount_minor")}).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


def agent(proxy: urllib.parse.SplitResult, rate: float, stats: collections.Counter, lock: threading.Lock,
          name: str) -> None:
    while True:
        time.sleep(random.expovariate(rate))
        order, key = f"demo-{uuid.uuid4().hex[:12]}", str(uuid.uuid4())
        body = json.dumps({"amount_minor": random.randint(100, 20000), "currency": "EUR"})
        trigger = None
        for attempt in range(4):
            headers = {"Content-Type": "application/json", "Idempotency-Key": f'"{key}"', "X-Agent-Id": name,
                       "traceparent": f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-01"}
            if trigger:
                headers["Idempotency-Trigger"] = trigger
            try:
                conn = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=30)
                conn.request("POST", f"/charges/{order}", body=body, headers=headers)
                status = conn.getresponse().status
                conn.close()
            except OSError:
                status = 0  # the proxy not up yet, or gone: the framework retries
            with lock:
                stats[status] += 1
            if status in (201, 422) or (status == 409 and attempt > 0):
                break
            # Why the next try is sent: the framework's retry policy after a 5xx or no answer,
            # the model re-issuing the tool call after a refusal, the HTTP client's own retry.
            trigger = {0: "framework", 502: "framework", 503: "framework", 504: "llm", 409: "llm"}.get(status, "http")
            time.sleep(1 + attempt)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--proxy", required=True)
    parser.add_argument("--upstream-port", type=int, required=True)
    parser.add_argument("--rate", type=float, default=2.0, help="operations per second, all agents together")
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--lost-answers", type=float, default=0.05)
    parser.add_argument("--slow-answers", type=float, default=0.02)
    args = parser.parse_args()
    tool = Tool(args.upstream_port, args.lost_answers, args.slow_answers)
    threading.Thread(target=tool.serve_forever, daemon=True).start()
    proxy = urllib.parse.urlsplit(args.proxy)
    stats: collections.Counter = collections.Counter()
    lock = threading.Lock()
    for i in range(args.agents):
        threading.Thread(target=agent, args=(proxy, args.rate / args.agents, stats, lock, f"demo-agent-{i + 1}"),
                         daemon=True).start()
    print(f"tool on 127.0.0.1:{args.upstream_port}; {args.agents} agents through {args.proxy}", flush=True)
    while True:
        time.sleep(60)
        with tool.lock:
            times = collections.Counter(tool.charges.values())
        with lock:
            answers = dict(sorted(stats.items()))
        print(f"{time.strftime('%H:%M:%S')} orders charged once: {times[1]}, more than once: "
              f"{sum(v for k, v in times.items() if k > 1)}; answers by status: {answers}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
