#!/usr/bin/env python3
"""The proxy's Grafana dashboard against a real proxy and a real Prometheus: every query of
dashboards/grafana/dashboards/idemwatch-proxy.json (as idemwatch-dashboard-lint --print-exprs
gives them, variables filled in) returns data while agents send charges through the proxy, some
of whose answers are lost (unknown outcomes, their retries refused).

  dashboard_test.py --proxy BINARY --dsn DSN --lint LINT_BINARY --dashboard FILE

Exit 0 when every query returned a number, 1 otherwise (each check printed).
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid

import proxy_test as pt

JOB = "idemwatch-proxy"
RATE_INTERVAL = "10s"


def query(port: int, expr: str) -> dict:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as res:
        return json.load(res)


def numbers(answer: dict) -> list[float]:
    out = []
    for sample in answer.get("data", {}).get("result", []):
        value = float(sample["value"][1])
        if math.isfinite(value):
            out.append(value)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--proxy", required=True)
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--lint", required=True)
    parser.add_argument("--dashboard", required=True)
    args = parser.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="idemwatch-proxy-dashboard-"))
    upstream = pt.Upstream()
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    proxy = pt.Proxy(args.proxy, args.dsn, upstream.server_address[1], work)
    prometheus_port = pt.free_port()
    (work / "prometheus.yml").write_text(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: {JOB}
    static_configs:
      - targets: ["127.0.0.1:{proxy.port}"]
""")
    prometheus = subprocess.Popen(
        ["prometheus", f"--config.file={work}/prometheus.yml", f"--storage.tsdb.path={work}/tsdb",
         f"--web.listen-address=127.0.0.1:{prometheus_port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=open(work / "prometheus.log", "w"))
    stop = threading.Event()

    def agents() -> None:
        # Charges answered, their repeats replayed, and now and then an answer lost after the
        # charge: an unknown outcome whose retry the proxy refuses.
        n = 0
        while not stop.is_set():
            n += 1
            key, order = str(uuid.uuid4()), f"o-dash-{n}"
            mode = "drop" if n % 5 == 0 else "ok"
            proxy.post(f"/charges/{order}", {"amount_minor": 100, "mode": mode}, pt.key_header(key))
            proxy.post(f"/charges/{order}", {"amount_minor": 100, "mode": mode},
                       {**pt.key_header(key), "Idempotency-Trigger": "framework"})

    traffic = threading.Thread(target=agents, daemon=True)
    try:
        traffic.start()
        up = f'count_over_time(up{{job="{JOB}"}}[{RATE_INTERVAL}])'
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if max(numbers(query(prometheus_port, up)) or [0]) >= 8:
                    break
            except OSError:
                pass
            time.sleep(1)
        else:
            pt.check(False, f"Prometheus scrapes the proxy 8 times in {RATE_INTERVAL} within 90 s")
        lint = subprocess.run([args.lint, "--print-exprs", "--with-source", "--set", f"job={JOB}",
                               "--set", f"instance=127.0.0.1:{proxy.port}", "--set",
                               f"__rate_interval={RATE_INTERVAL}", args.dashboard],
                              capture_output=True, text=True, timeout=30)
        pt.check(lint.returncode == 0, f"idemwatch-dashboard-lint --print-exprs runs ({lint.stderr.strip()})")
        queried = 0
        for line in lint.stdout.splitlines():
            _, panel, ref, expr = line.split("\t", 3)
            queried += 1
            answer = query(prometheus_port, expr)
            pt.check(answer.get("status") == "success" and bool(numbers(answer)),
                     f'"{panel}" {ref} returns a number: {expr} ({answer.get("error", "")})')
        pt.check(queried >= 8, f"the dashboard's queries were all run ({queried})")
    finally:
        stop.set()
        traffic.join(30)
        prometheus.terminate()
        prometheus.wait(30)
        proxy.stop()
        upstream.shutdown()
    return pt.verdict("proxy dashboard", work)


if __name__ == "__main__":
    sys.exit(main())
