#!/usr/bin/env python3
"""idemwatch-proxy end to end: a real upstream that charges and counts (an HTTP server in this
process), the proxy in front of it, a real PostgreSQL behind it.

  proxy_test.py --proxy BINARY --dsn DSN

Exit 0 when every check holds, 1 when one fails (each printed).
"""

from __future__ import annotations

import argparse
import collections
import http.client
import http.server
import json
import os
import pathlib
import random
import re
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

FAILURES: list[str] = []


def check(ok: bool, what: str) -> None:
    print("proxy:", "ok  " if ok else "FAIL", what, flush=True)
    if not ok:
        FAILURES.append(what)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Upstream(http.server.ThreadingHTTPServer):
    """Charges an order per POST /charges/ORDER and counts them; the body's "mode" picks a
    behaviour: slow (answers after 3 s), declined (402), error (500), refused (503), drop (reads
    the request, closes without an answer)."""

    daemon_threads = True
    # socketserver listens with a backlog of 5: a burst of new upstream connections from the proxy
    # (one a request) would see SYNs dropped and time out connecting on a busy machine.
    request_queue_size = 128

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a slow answer to a proxy that gave up on it: the proxy's part, not the upstream's

    def __init__(self) -> None:
        self.charges: collections.Counter = collections.Counter()
        self.dropped: set[str] = set()  # orders charged whose answer was never sent
        self.authorization: dict[str, str | None] = {}  # the Authorization each order came with
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), UpstreamHandler)


class UpstreamHandler(http.server.BaseHTTPRequestHandler):
    server: Upstream

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 (the handler's API)
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        order = self.path.rsplit("/", 1)[-1]
        with self.server.lock:
            self.server.charges[order] += 1
            n = self.server.charges[order]
            self.server.authorization[order] = self.headers.get("Authorization")
        mode = body.get("mode", "ok")
        if mode == "flaky" and random.Random(order).random() < 0.2:
            mode = "drop"  # the seeds' fault: charged, and the answer lost on the way back
            with self.server.lock:
                self.server.dropped.add(order)
        if mode == "drop":
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if mode == "slow":
            time.sleep(3)
        time.sleep(0.3)  # the charge takes a while: concurrent repeats arrive meanwhile
        status = {"declined": 402, "error": 500, "refused": 503}.get(mode, 201)
        answer = json.dumps({"order": order, "charge": f"ch_{order}_{n}", "status": status}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Charge-Id", f"ch_{order}_{n}")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


class Proxy:
    def __init__(self, binary: str, dsn: str, upstream_port: int, work: pathlib.Path, caller_header: str = "",
                 settings: str = "", routes: str = ""):
        self.port = free_port()
        config = self.config = work / f"proxy-{self.port}.yml"
        config.write_text(f"""
listen: 127.0.0.1:{self.port}
{f"caller_header: {caller_header}" if caller_header else ""}
{settings}
database:
  dsn: "{dsn}"
  workers: 4
routes:
  - name: charge
    path: /charges/{{order_id}}
    methods: [POST]
    upstream: http://127.0.0.1:{upstream_port}
    biz_type: payment
    biz_id: path:order_id
    tool: charge_card
    lease: 30s
    upstream_timeout: 1s
    max_body: 4096
    not_executed_statuses: [503]
  - name: charge-by-body
    path: /pay
    upstream: http://127.0.0.1:{upstream_port}/charges/by-body
    biz_type: payment
    biz_id: body:/order/id
  - name: unreachable
    path: /down/{{order_id}}
    upstream: http://127.0.0.1:{free_port()}
    biz_type: payment
    biz_id: path:order_id
  - name: lookup
    path: /optional/{{order_id}}
    upstream: http://127.0.0.1:{upstream_port}
    key_required: false
    biz_type: payment
    biz_id: path:order_id
{routes}""")
        self.log = open(work / f"proxy-{self.port}.log", "w")
        self.process = subprocess.Popen([binary, "--config.file", str(config)], stderr=self.log)
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise OSError(f"the proxy did not start; see {self.log.name}")
                time.sleep(0.1)

    def post(self, path: str, body: object, headers: dict | None = None,
             conn: http.client.HTTPConnection | None = None) -> tuple[int, dict, dict]:
        own = conn is None
        conn = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=20)
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn.request("POST", path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        res = conn.getresponse()
        raw = res.read()
        out_headers = {k.lower(): v for k, v in res.getheaders()}
        if own:
            conn.close()
        try:
            parsed = json.loads(raw) if raw else {}
        except ValueError:
            parsed = {"raw": raw.decode(errors="replace")}
        return res.status, out_headers, parsed

    def metrics(self) -> str:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        return text

    def stop(self) -> int:
        self.process.terminate()
        try:
            return self.process.wait(20)
        finally:
            self.log.close()


def sample(text: str, name: str, **labels: str) -> float | None:
    """One series' value in a /metrics text, its labels given in any order; None when absent."""
    want = name + ("{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}" if labels else "")
    for line in text.splitlines():
        if line.startswith(want + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def key_header(key: str) -> dict:
    return {"Idempotency-Key": f'"{key}"'}


def read_until_closed(s: socket.socket, limit: float) -> bytes:
    s.settimeout(limit)
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    return data


def hostile_clients(args: argparse.Namespace, upstream: Upstream, work: pathlib.Path) -> None:
    """A header over the limit, a client that sends a byte at a time, more connections than
    allowed: each is turned away within the proxy's limits, and well-behaved requests go on."""
    proxy = Proxy(args.proxy, args.dsn, upstream.server_address[1], work,
                  settings="request_timeout: 1s\nmax_connections: 40")
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    try:
        s = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        s.sendall(b"POST /charges/o-huge HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
        reply = read_until_closed(s, 5)
        s.close()
        check(reply.startswith(b"HTTP/1.1 431") and b"header-too-large" in reply and upstream.charges["o-huge"] == 0,
              f"a header over 16 KiB is 431 and goes nowhere ({reply[:40]!r})")

        # Slowloris: a header trickling in a byte at a time is cut off after request_timeout,
        # while a normal request meanwhile is answered.
        slow = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        started = time.monotonic()
        slow.sendall(b"POST /charges/o-slowloris HTTP/1.1\r\nHost: x\r\n")
        slow.settimeout(0.2)
        cut_after = None
        for _ in range(50):
            try:
                slow.sendall(b"X")
                if slow.recv(1) == b"":
                    cut_after = time.monotonic() - started
                    break
            except socket.timeout:
                continue
            except OSError:
                cut_after = time.monotonic() - started
                break
        slow.close()
        status, _, _ = proxy.post("/charges/o-beside-slow", {"amount_minor": 1}, key_header(str(uuid.uuid4())))
        check(cut_after is not None and 0.8 <= cut_after < 5 and upstream.charges["o-slowloris"] == 0,
              f"a client sending its header a byte at a time is cut off after request_timeout (after {cut_after} s)")
        check(status == 201, f"a normal request beside it is answered ({status})")

        # max_connections: 40 held open, the next is told 503 and closed; once they go, all is well.
        held = [socket.create_connection(("127.0.0.1", proxy.port), timeout=5) for _ in range(40)]
        time.sleep(0.5)
        extra = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        turned = read_until_closed(extra, 5)
        extra.close()
        check(turned.startswith(b"HTTP/1.1 503") and b"too-many-connections" in turned,
              f"a connection beyond max_connections is answered 503 and closed ({turned[:40]!r})")
        for h in held:
            h.close()
        time.sleep(0.5)
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        conn.request("GET", "/metrics")
        res = conn.getresponse()
        text = res.read().decode()
        conn.close()
        check(res.status == 200 and 'idemwatch_proxy_requests_total{result="overloaded",route=""} 1' in text
              and 'idemwatch_proxy_requests_total{result="too_large",route=""} 1' in text,
              "once they close, /metrics answers and counts the turned away and the oversized header")
    finally:
        proxy.stop()
        upstream.shutdown()


def self_signed(work: pathlib.Path, name: str) -> tuple[pathlib.Path, pathlib.Path]:
    cert, key = work / f"{name}.crt", work / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


def tls_upstreams(args: argparse.Namespace, work: pathlib.Path) -> None:
    """An https:// upstream: charged once through the proxy with its certificate checked; a
    certificate the route's CA did not sign, or that names another host, is refused before a
    byte of the request is sent, so the key may be retried."""
    cert, key = self_signed(work, "upstream")
    stranger, _ = self_signed(work, "stranger")
    upstream = Upstream()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    upstream.socket = context.wrap_socket(upstream.socket, server_side=True)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    port = upstream.server_address[1]
    routes = "".join(f"""
  - name: {name}
    path: /{name}/{{order_id}}
    upstream: https://{host}:{port}
    upstream_ca: {ca}
    biz_type: payment
    biz_id: path:order_id""" for name, host, ca in [("tls", "localhost", cert), ("stranger", "localhost", stranger),
                                                   ("misnamed", "127.0.0.1", cert)])
    proxy = Proxy(args.proxy, args.dsn, port, work, routes=routes + "\n")
    db = psycopg.connect(args.dsn, autocommit=True)
    try:
        key = str(uuid.uuid4())
        first = proxy.post("/tls/o-tls", {"amount_minor": 100}, key_header(key))
        again = proxy.post("/tls/o-tls", {"amount_minor": 100}, key_header(key))
        check(first[0] == 201 and again[1].get("idempotent-replayed") == "true" and upstream.charges["o-tls"] == 1,
              f"an https:// upstream is charged once, its certificate checked ({first[0]}: {first[2]})")
        for path, order, what in [("/stranger/o-stranger", "o-stranger", "a CA the route does not trust"),
                                  ("/misnamed/o-misnamed", "o-misnamed", "another host's name")]:
            status, _, body = proxy.post(path, {}, key_header(str(uuid.uuid4())))
            check(status == 502 and body.get("type") == "urn:idemwatch:problem:upstream-unreachable"
                  and "TLS handshake" in body.get("detail", "") and upstream.charges[order] == 0,
                  f"a certificate of {what} is refused before anything is sent ({status}: {body.get('detail')})")
        bad = work / "bad-ca.yml"
        bad.write_text(f"routes:\n  - path: /c\n    upstream: https://localhost:1\n    upstream_ca: {work}/none.pem\n"
                       "    biz_type: payment\n    biz_id: body:/id\n")
        run = subprocess.run([args.proxy, "--config.file", str(bad), "--db.dsn", args.dsn],
                             stderr=subprocess.PIPE, text=True, timeout=20)
        check(run.returncode != 0 and "upstream_ca" in run.stderr and "cannot be read" in run.stderr,
              f"a CA file that does not load stops the proxy at start ({run.stderr.strip()})")
    finally:
        proxy.stop()
        upstream.shutdown()
        db.close()


def openssl(work: pathlib.Path, *argv: str) -> None:
    subprocess.run(["openssl", *argv], cwd=work, check=True, capture_output=True)


def web_door(args: argparse.Namespace, work: pathlib.Path) -> None:
    """The proxy's own port through the exporter's web config: TLS with client certificates, whose
    subject becomes the caller that scopes keys; basic auth, whose user does, and whose login
    never reaches the upstream."""
    server_cert, server_key = self_signed(work, "door")
    openssl(work, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=agents-ca",
            "-keyout", "agents-ca.key", "-out", "agents-ca.crt")
    openssl(work, "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=agent-one/O=Acme Payments",
            "-keyout", "agent.key", "-out", "agent.csr")
    (work / "agent.ext").write_text("extendedKeyUsage=clientAuth\n")
    openssl(work, "x509", "-req", "-in", "agent.csr", "-CA", "agents-ca.crt", "-CAkey", "agents-ca.key",
            "-CAcreateserial", "-days", "1", "-extfile", "agent.ext", "-out", "agent.crt")
    import crypt  # noqa: PLC0415 (deprecated, still in Debian 12's Python; bcrypt through libxcrypt)
    hashed = crypt.crypt("s3cret", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=32))
    tls_config, auth_config = work / "web-tls.yml", work / "web-auth.yml"
    tls_config.write_text(f"tls_server_config:\n  cert_file: {server_cert}\n  key_file: {server_key}\n"
                          f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {work}/agents-ca.crt\n")
    auth_config.write_text(f"basic_auth_users:\n  alice: '{hashed}'\n")
    upstream = Upstream()
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    port = upstream.server_address[1]
    tls_proxy = Proxy(args.proxy, args.dsn, port, work, settings=f"web_config_file: {tls_config}")
    auth_proxy = Proxy(args.proxy, args.dsn, port, work, settings=f"web_config_file: {auth_config}")
    db = psycopg.connect(args.dsn, autocommit=True)

    def keys_of(key: str) -> list[str]:
        return [k for (k,) in db.execute("SELECT idempotency_key FROM idem.records WHERE idempotency_key LIKE %s",
                                         (f"% {key}",)).fetchall()]

    try:
        context = ssl.create_default_context(cafile=str(server_cert))
        context.load_cert_chain(work / "agent.crt", work / "agent.key")
        key = str(uuid.uuid4())
        conn = http.client.HTTPSConnection("localhost", tls_proxy.port, context=context, timeout=10)
        status, _, _ = tls_proxy.post("/charges/o-cert", {"amount_minor": 1}, key_header(key), conn=conn)
        conn.close()
        check(status == 201 and keys_of(key) == [f"POST charge O=Acme%20Payments,CN=agent-one {key}"],
              f"over TLS, the verified client certificate's subject scopes the key ({status}: {keys_of(key)})")
        anonymous = ssl.create_default_context(cafile=str(server_cert))
        refused = None
        try:
            conn = http.client.HTTPSConnection("localhost", tls_proxy.port, context=anonymous, timeout=10)
            refused = tls_proxy.post("/charges/o-nocert", {"amount_minor": 1}, key_header(str(uuid.uuid4())), conn=conn)
        except (ssl.SSLError, ConnectionError, http.client.HTTPException):
            pass
        check(refused is None and upstream.charges["o-nocert"] == 0,
              f"a client without a certificate is refused at the handshake ({refused and refused[0]})")
        try:
            plain = tls_proxy.post("/charges/o-plain", {}, key_header(str(uuid.uuid4())))
        except (ConnectionError, http.client.HTTPException, socket.timeout):
            plain = None
        check(plain is None and upstream.charges["o-plain"] == 0, "plain HTTP on the TLS port gets nothing")

        login = "Basic " + __import__("base64").b64encode(b"alice:s3cret").decode()
        wrong = "Basic " + __import__("base64").b64encode(b"alice:guess").decode()
        status, headers, body = auth_proxy.post("/charges/o-anon", {}, key_header(str(uuid.uuid4())))
        check(status == 401 and headers.get("www-authenticate", "").startswith("Basic")
              and body.get("type") == "urn:idemwatch:problem:unauthorized" and upstream.charges["o-anon"] == 0,
              f"without a login: 401 with a Basic challenge, nothing sent ({status})")
        status, _, _ = auth_proxy.post("/charges/o-wrong", {}, {**key_header(str(uuid.uuid4())), "Authorization": wrong})
        check(status == 401 and upstream.charges["o-wrong"] == 0, f"a wrong password: 401 ({status})")
        key = str(uuid.uuid4())
        status, _, _ = auth_proxy.post("/charges/o-alice", {"amount_minor": 1}, {**key_header(key), "Authorization": login})
        check(status == 201 and keys_of(key) == [f"POST charge alice {key}"],
              f"the basic-auth user scopes the key ({status}: {keys_of(key)})")
        check(upstream.authorization.get("o-alice") is None,
              f"the proxy's login is not sent upstream ({upstream.authorization.get('o-alice')})")
    finally:
        tls_proxy.stop()
        auth_proxy.stop()
        upstream.shutdown()
        db.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--proxy", required=True)
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--idemctl", required=True)
    args = parser.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="idemwatch-proxy-test-"))

    # A mistake in the routes stops the proxy at start, naming the field.
    for text, named in [("routes:\n  - path: /c/{id}\n    upstream: http://127.0.0.1:1\n    biz_type: payment\n"
                         "    biz_id: path:order\n", "path parameter 'order'"),
                        ("routes:\n  - path: /c\n    upstream: ftp://x\n    biz_type: payment\n    biz_id: body:/id\n",
                         "is not an http:// or https:// URL"),
                        ("routes:\n  - path: /c\n    upstream: http://127.0.0.1:1\n    biz_type: payment\n"
                         "    biz_id: body:/id\n    upstream_keepalive: always\n",
                         "upstream_keepalive: 'always' is not a positive duration"),
                        ("routes:\n  - path: /c\n    upstream: http://127.0.0.1:1\n    biz_type: payment\n"
                         "    biz_id: body:/id\n    upstream_keepalve: 2s\n", "unknown field 'upstream_keepalve'"),
                        ("routes: [", "not YAML")]:
        bad = work / "bad.yml"
        bad.write_text(text)
        run = subprocess.run([args.proxy, "--config.file", str(bad), "--db.dsn", args.dsn],
                             stderr=subprocess.PIPE, text=True, timeout=20)
        check(run.returncode != 0 and named in run.stderr,
              f"a bad route file is refused at start naming the problem ({run.returncode}: {run.stderr.strip()})")
        checked = subprocess.run([args.proxy, "--check", "--config.file", str(bad)], capture_output=True, text=True,
                                 timeout=20)
        check(checked.returncode == run.returncode and checked.stderr == run.stderr,
              "--check refuses the same file with the same words")
    upstream = Upstream()
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    proxy = Proxy(args.proxy, args.dsn, upstream.server_address[1], work)
    db = psycopg.connect(args.dsn, autocommit=True)
    checked = subprocess.run([args.proxy, "--check", "--config.file", str(proxy.config)], capture_output=True,
                             text=True, timeout=20)
    check(checked.returncode == 0 and "4 route(s), ready to serve" in checked.stdout,
          f"--check passes a good file without serving it ({checked.returncode}: {checked.stdout.strip()})")

    def record(route: str, key: str) -> str | None:
        row = db.execute("SELECT status FROM idem.records WHERE idempotency_key = %s",
                         (f"POST {route} {key}",)).fetchone()
        return row[0] if row else None

    try:
        # Twenty concurrent requests with one key: one charge, the others wait or replay.
        key, order = str(uuid.uuid4()), "o-concurrent"
        answers: list = []
        barrier = threading.Barrier(20)

        def send() -> None:
            barrier.wait()
            answers.append(proxy.post(f"/charges/{order}", {"amount_minor": 500}, key_header(key)))

        threads = [threading.Thread(target=send) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        statuses = collections.Counter(a[0] for a in answers)
        check(upstream.charges[order] == 1, f"20 concurrent requests under one key charge once "
              f"(upstream charged {upstream.charges[order]}; answers {dict(statuses)})")
        check(set(statuses) <= {201, 409} and statuses[201] >= 1,
              "every other request got 409 (in progress) or the replayed 201")
        waiting = [a for a in answers if a[0] == 409]
        check(all(a[1].get("retry-after", "").isdigit() for a in waiting)
              and all(a[1].get("content-type") == "application/problem+json" for a in waiting),
              "each 409 is a problem with Retry-After")
        replayed = [a for a in answers if a[0] == 201 and a[1].get("idempotent-replayed") == "true"]
        first = [a for a in answers if a[0] == 201 and "idempotent-replayed" not in a[1]]
        check(len(first) == 1, f"exactly one answer came from the upstream itself ({len(first)})")

        # A completed key replays the stored answer: status, fields, body.
        status, headers, body = proxy.post(f"/charges/{order}", {"amount_minor": 500}, key_header(key))
        check(status == 201 and headers.get("idempotent-replayed") == "true"
              and body == first[0][2] and headers.get("x-charge-id") == first[0][1].get("x-charge-id"),
              f"a repeat replays the first answer with Idempotent-Replayed ({status}, {body})")
        check(upstream.charges[order] == 1, "the replay did not reach the upstream")
        check(record("charge", key) == "SUCCESS", "the record is SUCCESS")
        del replayed

        # The same key with another request is 422.
        status, headers, body = proxy.post(f"/charges/{order}", {"amount_minor": 900}, key_header(key))
        check(status == 422 and body.get("type", "").endswith("payload_mismatch"),
              f"the key with another body is 422 payload_mismatch ({status} {body.get('type')})")

        # Malformed keys are 400 and reach nothing.
        before = sum(upstream.charges.values())
        for what, headers_ in [("no key", {}), ("a bare token", {"Idempotency-Key": "abc"}),
                               ("a list", {"Idempotency-Key": '"a", "b"'}),
                               ("an unclosed string", {"Idempotency-Key": '"abc'})]:
            status, _, body = proxy.post("/charges/o-bad", {"amount_minor": 1}, headers_)
            check(status == 400 and "detail" in body, f"{what} is 400 ({status}: {body.get('detail')})")
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        conn.putrequest("POST", "/charges/o-bad")
        conn.putheader("Idempotency-Key", '"one"')
        conn.putheader("Idempotency-Key", '"two"')
        conn.putheader("Content-Length", "2")
        conn.endheaders(b"{}")
        res = conn.getresponse()
        res.read()
        conn.close()
        check(res.status == 400, f"two Idempotency-Key fields are 400 ({res.status})")
        check(sum(upstream.charges.values()) == before, "no malformed request reached the upstream")

        # An upstream that hangs past the route's timeout: UNKNOWN, never sent again.
        key = str(uuid.uuid4())
        status, _, body = proxy.post("/charges/o-slow", {"mode": "slow"}, key_header(key))
        check(status == 504 and body.get("type", "").endswith("outcome-unknown"),
              f"an upstream past its timeout is 504 outcome-unknown ({status})")
        check(record("charge", key) == "UNKNOWN", f"its record is UNKNOWN ({record('charge', key)})")
        status, _, body = proxy.post("/charges/o-slow", {"mode": "slow"}, {**key_header(key), "Idempotency-Trigger": "llm"})
        check(status == 409 and body.get("type", "").endswith("outcome-unknown"),
              f"its retry is 409 outcome-unknown ({status})")
        time.sleep(3.5)
        check(upstream.charges["o-slow"] == 1, f"the retry never reached the upstream ({upstream.charges['o-slow']})")

        # A connection closed without an answer: UNKNOWN.
        key = str(uuid.uuid4())
        status, _, _ = proxy.post("/charges/o-drop", {"mode": "drop"}, key_header(key))
        check(status in (502, 504) and record("charge", key) == "UNKNOWN",
              f"an answer cut off is UNKNOWN ({status}, {record('charge', key)})")

        # An ambiguous 500: UNKNOWN; a documented refusal (503): FAILED, retry allowed.
        key = str(uuid.uuid4())
        status, _, _ = proxy.post("/charges/o-500", {"mode": "error"}, key_header(key))
        proxy.post("/charges/o-500", {"mode": "error"}, key_header(key))
        check(status == 502 and record("charge", key) == "UNKNOWN" and upstream.charges["o-500"] == 1,
              f"a 500 is UNKNOWN and its retry not sent ({status}, {upstream.charges['o-500']})")
        key = str(uuid.uuid4())
        status, _, _ = proxy.post("/charges/o-503", {"mode": "refused"}, key_header(key))
        check(status == 503 and record("charge", key) == "FAILED",
              f"a 503 the route calls a refusal is relayed and FAILED ({status}, {record('charge', key)})")
        status, _, _ = proxy.post("/charges/o-503", {"mode": "refused"}, key_header(key))
        check(upstream.charges["o-503"] == 2, "a refused request's retry is sent again")

        # A final 4xx is replayed, never sent again.
        key = str(uuid.uuid4())
        status, _, body = proxy.post("/charges/o-declined", {"mode": "declined"}, key_header(key))
        status2, headers2, body2 = proxy.post("/charges/o-declined", {"mode": "declined"}, key_header(key))
        check(status == 402 and status2 == 402 and body2 == body and headers2.get("idempotent-replayed") == "true"
              and upstream.charges["o-declined"] == 1,
              f"a 402 is final and replayed ({status}, {status2}, charged {upstream.charges['o-declined']})")

        # An upstream that refuses the connection: nothing sent, FAILED with a retry allowed.
        key = str(uuid.uuid4())
        status, _, body = proxy.post("/down/o-down", {}, key_header(key))
        check(status == 502 and body.get("type", "").endswith("upstream-unreachable")
              and record("unreachable", key) == "FAILED",
              f"an unreachable upstream is 502 and FAILED, retry allowed ({status}, {record('unreachable', key)})")
        status, _, body = proxy.post("/down/o-down", {}, key_header(key))
        check(status == 502 and body.get("type", "").endswith("upstream-unreachable"),
              "its retry is claimed and tried again")

        # The business object from the body; the trace id from traceparent.
        key = str(uuid.uuid4())
        trace = uuid.uuid4().hex
        status, _, _ = proxy.post("/pay", {"order": {"id": "o-body"}, "amount_minor": 100},
                                  {**key_header(key), "traceparent": f"00-{trace}-{'1' * 16}-01"})
        row = db.execute("SELECT r.biz_id, a.trace_id FROM idem.records r JOIN idem.attempts a "
                         "USING (idempotency_key) WHERE r.idempotency_key = %s",
                         (f"POST charge-by-body {key}",)).fetchone()
        check(status == 201 and row == ("o-body", trace),
              f"the business object comes from the body and the trace id from traceparent ({status}, {row})")
        status, _, body = proxy.post("/pay", {"amount_minor": 100}, key_header(str(uuid.uuid4())))
        check(status == 400 and "/order/id" in body.get("detail", ""),
              f"a body without the business object is 400 naming the pointer ({status})")

        # Limits and routing.
        status, _, _ = proxy.post("/charges/o-big", {"pad": "x" * 5000}, key_header(str(uuid.uuid4())))
        check(status == 413 and upstream.charges["o-big"] == 0, f"a body over max_body is 413 ({status})")
        status, _, _ = proxy.post("/nowhere", {}, key_header(str(uuid.uuid4())))
        check(status == 404, f"a request of no route is 404 ({status})")
        status, _, _ = proxy.post("/optional/o-free", {})
        check(status == 201 and upstream.charges["o-free"] == 1, "a route without a required key passes through")

        # A chunked body is read whole; one over the limit is refused while it arrives.
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        conn.request("POST", "/charges/o-chunked", body=iter([b'{"amount_', b'minor": 7}']),
                     headers={**key_header(str(uuid.uuid4())), "Content-Type": "application/json"},
                     encode_chunked=True)
        res = conn.getresponse()
        res.read()
        conn.close()
        check(res.status == 201 and upstream.charges["o-chunked"] == 1, f"a chunked body goes through ({res.status})")
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        conn.request("POST", "/charges/o-chunked-big", body=iter([b"x" * 3000, b"y" * 3000]),
                     headers=key_header(str(uuid.uuid4())), encode_chunked=True)
        res = conn.getresponse()
        res.read()
        conn.close()
        check(res.status == 413 and upstream.charges["o-chunked-big"] == 0,
              f"a chunked body over max_body is 413 ({res.status})")

        # The seeds' fault test through the proxy: a fifth of the answers lost after the charge,
        # agents retrying from every source. Charges to orders 1:1; every lost answer UNKNOWN.
        orders = [f"o-fault-{i}" for i in range(120)]
        refused_retries = collections.Counter()

        def agent(mine: list[str]) -> None:
            for order in mine:
                key = f"fault-{order}"
                for trigger in ["initial", "http", "framework", "llm"]:
                    headers = key_header(key) if trigger == "initial" else {**key_header(key), "Idempotency-Trigger": trigger}
                    try:
                        status, _, body = proxy.post(f"/charges/{order}", {"amount_minor": 250, "mode": "flaky"}, headers)
                    except OSError:
                        continue
                    if status == 409 and body.get("type", "").endswith("outcome-unknown"):
                        refused_retries[order] += 1
                    if status == 201:
                        break

        agents = [threading.Thread(target=agent, args=(orders[i::6],)) for i in range(6)]
        for t in agents:
            t.start()
        for t in agents:
            t.join()
        statuses = dict(db.execute("SELECT biz_id, status FROM idem.records WHERE idempotency_key LIKE 'POST charge fault-%'").fetchall())
        check(all(upstream.charges[o] == 1 for o in orders),
              f"each of {len(orders)} orders charged once through lost answers and retries "
              f"({sum(upstream.charges[o] for o in orders)} charges)")
        lost = {o for o in orders if o in upstream.dropped}
        check(len(lost) > 0 and all(statuses.get(o) == "UNKNOWN" for o in lost),
              f"every order whose answer was lost ({len(lost)}) is UNKNOWN")
        check(all(statuses.get(o) == "SUCCESS" for o in orders if o not in lost), "every other order is SUCCESS")
        check(all(refused_retries[o] == 3 for o in lost),
              "each retry of a lost answer (3 an order, from http, framework and llm) got 409 outcome-unknown")

        # SIGHUP reads the routes again; a file that does not parse changes nothing.
        original = proxy.config.read_text()
        proxy.config.write_text(original + f"""  - name: charge-again
    path: /again/{{order_id}}
    upstream: http://127.0.0.1:{upstream.server_address[1]}/charges
    biz_type: payment
    biz_id: path:order_id
""")
        proxy.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        status = 404
        while status == 404 and time.monotonic() < deadline:
            time.sleep(0.1)
            status, _, _ = proxy.post("/again/o-reloaded", {"amount_minor": 3}, key_header(str(uuid.uuid4())))
        check(status == 201 and upstream.charges["o-reloaded"] == 1, f"a route added by SIGHUP serves ({status})")
        proxy.config.write_text("routes: [")
        proxy.process.send_signal(signal.SIGHUP)
        time.sleep(1)
        status, _, _ = proxy.post("/again/o-kept", {"amount_minor": 3}, key_header(str(uuid.uuid4())))
        log = pathlib.Path(proxy.log.name).read_text()
        check(status == 201 and "reload refused" in log, f"a broken file on SIGHUP keeps the routes ({status})")
        proxy.config.write_text(original)

        # Keep-alive: several requests on one connection.
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        codes = [proxy.post("/charges/o-keepalive", {"amount_minor": 5}, key_header(f"ka-{i}"), conn)[0]
                 for i in range(3)]
        conn.close()
        check(codes == [201, 409, 409], f"requests on one kept-alive connection are each answered ({codes})")

        # The proxy's own figures: each request counted once, by route and result.
        text = proxy.metrics()

        def series(name: str, **labels: str) -> float | None:
            return sample(text, name, **labels)

        expected = [("charge", "unknown", 3 + len(lost)), ("charge", "unknown_refused", 2 + 3 * len(lost)), ("unreachable", "not_sent", 2),
                    ("", "no_route", 1), ("charge", "too_large", 2), ("charge", "payload_mismatch", 1),
                    ("lookup", "passed_through", 1), ("charge-by-body", "sent", 1)]
        for route, result, n in expected:
            got = series("idemwatch_proxy_requests_total", result=result, route=route)
            check(got == n, f"/metrics counts {n} {result} on route '{route}' ({got})")
        got = series("idemwatch_proxy_upstream_duration_seconds_count", route="charge")
        check(got is not None and got >= 8,
              f"/metrics has the upstream's latency by route ({got} observations)")
        got = series("idemwatch_proxy_database_prepared_statements")
        check(got == 1, f"on sessions of its own the proxy sends a claim's calls prepared ({got})")
        # A connection kept alive between requests does not hold a stop up.
        idle = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        idle.request("GET", "/metrics")
        idle.getresponse().read()
    finally:
        stopping = time.monotonic()
        code = proxy.stop()
        stop_seconds = time.monotonic() - stopping
        upstream.shutdown()
        db.close()

    # The database out of reach: 503, and nothing is sent upstream.
    down = Proxy(args.proxy, "host=127.0.0.1 port=1 user=nobody dbname=none connect_timeout=2",
                 upstream.server_address[1], work)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    try:
        status, _, body = down.post("/charges/o-nodb", {}, key_header(str(uuid.uuid4())))
        check(status == 503 and upstream.charges["o-nodb"] == 0,
              f"with the database down the proxy answers 503 and sends nothing ({status}: {body.get('detail')})")
    finally:
        down.stop()
        upstream.shutdown()
    check(code == 0, f"the proxy stops cleanly on SIGTERM (exit {code})")
    check(stop_seconds < 5, f"an idle kept-alive connection does not hold the stop up ({stop_seconds:.1f} s)")

    # Keys scoped to the caller a front door names: the same key of two callers is two requests.
    scoped = Proxy(args.proxy, args.dsn, upstream.server_address[1], work, caller_header="X-Caller")
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    db = psycopg.connect(args.dsn, autocommit=True)
    try:
        key = str(uuid.uuid4())
        a = scoped.post("/charges/o-tenant-a", {"amount_minor": 100}, {**key_header(key), "X-Caller": "tenant-a"})
        b = scoped.post("/charges/o-tenant-b", {"amount_minor": 100}, {**key_header(key), "X-Caller": "tenant-b"})
        again = scoped.post("/charges/o-tenant-a", {"amount_minor": 100}, {**key_header(key), "X-Caller": "tenant-a"})
        check(a[0] == 201 and b[0] == 201 and upstream.charges["o-tenant-a"] == 1 and upstream.charges["o-tenant-b"] == 1,
              f"two callers' same key are two requests ({a[0]}, {b[0]})")
        check(again[0] == 201 and again[1].get("idempotent-replayed") == "true" and again[2] == a[2],
              "a caller's repeat replays its own answer")
        keys = [k for (k,) in db.execute("SELECT idempotency_key FROM idem.records WHERE idempotency_key LIKE %s "
                                         "ORDER BY 1", (f"% {key}",)).fetchall()]
        check(keys == [f"POST charge tenant-a {key}", f"POST charge tenant-b {key}"], f"each record names its caller ({keys})")
        status, _, _ = scoped.post("/charges/o-tenant-c", {}, key_header(str(uuid.uuid4())))
        check(status == 401 and upstream.charges["o-tenant-c"] == 0, f"a request without its caller is 401 ({status})")
    finally:
        scoped.stop()
        upstream.shutdown()
        db.close()

    hostile_clients(args, upstream, work)
    tls_upstreams(args, work)
    web_door(args, work)
    fingerprints_pipelining_and_stop(args, work)
    upstream_keepalive(args, work)
    late_claim(args, work)
    database_sessions(args, work)
    through_pgbouncer(args, work)
    simulated_agents(args, work)
    return verdict("proxy", work)


def simulated_agents(args: argparse.Namespace, work: pathlib.Path) -> None:
    """The seeds' fault test through the proxy, with idemctl simulate's agents and its downstream as
    the proxy's upstream: every business type, lost answers (10%), declines, refusals before acting,
    a buggy second charge, retries from every source and concurrent copies. The downstream's own
    journal is the truth: no operation and no business object acted twice, every lost answer an
    UNKNOWN record that was not sent again, nothing FAILED that happened."""
    tool_port = free_port()
    tools = {"pay": "payment", "refund": "refund", "issue_coupon": "coupon", "payout": "payout"}
    routes = "".join(f"""
  - name: {tool}
    path: /{tool}/{{biz_id}}
    upstream: http://127.0.0.1:{tool_port}
    biz_type: {biz_type}
    biz_id: path:biz_id
    tool: {tool}
    lease: 30s
    upstream_timeout: 5s
    not_executed_statuses: [503]
""" for tool, biz_type in tools.items())
    proxy = Proxy(args.proxy, args.dsn, free_port(), work, settings="", routes=routes)
    db = psycopg.connect(args.dsn, autocommit=True)
    journal_path = work / "simulated-journal.tsv"
    try:
        run = subprocess.run(
            [args.idemctl, "simulate", "--db.dsn", args.dsn, "--quiet", "--requests", "400", "--agents", "4",
             "--seed", "11", "--run-id", "viaproxy", "--biz-types", ",".join(tools.values()),
             "--through-proxy", f"http://127.0.0.1:{proxy.port}", "--tool-listen", f"127.0.0.1:{tool_port}",
             "--response-loss-rate", "0.1", "--decline-rate", "0.05", "--refused-rate", "0.05",
             "--crash-rate", "0", "--double-charge-rate", "0.03", "--downstream-journal", str(journal_path)],
            capture_output=True, text=True, timeout=300)
        check(run.returncode == 0, f"idemctl simulate --through-proxy ran ({run.returncode}: {run.stderr.strip()[-400:]})")
        summary = run.stdout
        effects = []
        for line in journal_path.read_text().splitlines() if journal_path.exists() else []:
            f = line.split("\t")
            if len(f) >= 7:
                effects.append(dict(key=f[0], biz_type=f[1], biz_id=f[2], kind=f[3], deliberate=f[6] == "1"))
        made = collections.Counter(e["key"] for e in effects if not e["deliberate"])
        objects = collections.Counter((e["biz_type"], e["biz_id"]) for e in effects if not e["deliberate"])
        check(len(made) > 300 and max(made.values()) == 1,
              f"through the proxy, no operation acted twice ({len(made)} acted, most {max(made.values(), default=0)} times)")
        check(max(objects.values(), default=0) == 1, "no business object acted twice, under any key")
        check(set(e["biz_type"] for e in effects) == set(tools.values()), "every business type acted")
        records = dict(db.execute("SELECT idempotency_key, status FROM idem.records WHERE biz_id LIKE 'viaproxy-%'").fetchall())
        check(len({k.split(" ", 2)[2].split(":")[0] for k in records}) == 400, f"one record per operation ({len(records)})")
        check(all(records.get(k) in ("SUCCESS", "UNKNOWN") for k in made),
              "every operation that acted is SUCCESS or UNKNOWN, never FAILED")
        lost = int(re.search(r"responses lost (\d+)", summary).group(1)) if "responses lost" in summary else -1
        unknown = sum(s == "UNKNOWN" for s in records.values())
        check(lost > 10 and unknown == lost, f"every lost answer is an UNKNOWN record ({unknown} UNKNOWN, {lost} lost)")
        (resent,) = db.execute("SELECT count(*) FROM idem.transitions t JOIN idem.records r USING (idempotency_key) "
                               "WHERE r.biz_id LIKE 'viaproxy-%' AND t.from_status = 'UNKNOWN'").fetchone()
        check(resent == 0, f"no UNKNOWN record was claimed again ({resent})")
        money = sum(1 for e in effects if e["kind"] != "-")
        (flows,) = db.execute("SELECT count(*) FROM idem.fund_flows WHERE biz_id LIKE 'viaproxy-%'").fetchone()
        check(flows == money, f"the gateway's ledger holds every movement the downstream made ({flows} of {money})")
        (dups,) = db.execute("SELECT count(*) FROM idem.fund_flows WHERE biz_id LIKE 'viaproxy-%' "
                             "AND duplicate_of IS NOT NULL").fetchone()
        deliberate = sum(1 for e in effects if e["deliberate"] and e["kind"] != "-")
        check(deliberate > 0 and dups == deliberate, f"the buggy second charges are flagged duplicates ({dups} of {deliberate})")
        sources = dict(db.execute("SELECT trigger_source, count(*) FROM idem.attempts a JOIN idem.records r "
                                  "USING (idempotency_key) WHERE r.biz_id LIKE 'viaproxy-%' GROUP BY 1").fetchall())
        check(all(sources.get(s, 0) > 0 for s in ("initial", "llm", "framework", "http", "callback")),
              f"retries from every source reached the proxy ({sources})")
    finally:
        proxy.stop()
        db.close()


def wait_until_blocked_by(db: psycopg.Connection, holder: psycopg.Connection) -> None:
    """Until a session waits on a lock the holder's transaction holds (at most 30 s)."""
    deadline = time.monotonic() + 30
    while not db.execute("SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                         (holder.info.backend_pid,)).fetchone()[0]:
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)


def late_claim(args: argparse.Namespace, work: pathlib.Path) -> None:
    """A claim the store acknowledges only after its lease ran out (here it waits behind another
    transaction holding the key, as a commit waits for a synchronous standby that is not there)
    is not sent upstream: meanwhile the record looked abandoned and a person may have settled it.
    The proxy gives the claim back (FAILED, retry allowed) and answers 503 with Retry-After; the
    retry with the same key is sent, once."""
    upstream = Upstream()
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    proxy = Proxy(args.proxy, args.dsn, upstream.server_address[1], work, routes=f"""
  - name: short
    path: /short/{{order_id}}
    upstream: http://127.0.0.1:{upstream.server_address[1]}
    biz_type: payment
    biz_id: path:order_id
    lease: 500ms
""")
    db = psycopg.connect(args.dsn, autocommit=True)
    holder = psycopg.connect(args.dsn)
    try:
        key, order = str(uuid.uuid4()), "o-late-claim"
        holder.execute("SELECT idem.begin(%s, 'payment', 'held', 'charge', NULL, 'initial', '{}')",
                       (f"POST short {key}",))
        answer: list = []
        sender = threading.Thread(target=lambda: answer.append(
            proxy.post(f"/short/{order}", {"amount_minor": 700}, key_header(key))))
        sender.start()
        wait_until_blocked_by(db, holder)
        time.sleep(0.6)
        holder.rollback()
        sender.join(30)
        status, headers, problem = answer[0] if answer else (0, {}, {})
        check(status == 503 and "claim-late" in problem.get("type", "") and headers.get("retry-after") == "1",
              f"a claim acknowledged past its lease is answered 503 with Retry-After ({status}, {problem})")
        check(upstream.charges[order] == 0, f"it is not sent upstream ({upstream.charges[order]} charges)")
        row = db.execute("SELECT status, retry_allowed FROM idem.records WHERE idempotency_key = %s",
                         (f"POST short {key}",)).fetchone()
        check(row == ("FAILED", True), f"the claim is given back, FAILED with retry allowed ({row})")
        again = proxy.post(f"/short/{order}", {"amount_minor": 700}, key_header(key))
        check(again[0] == 201 and upstream.charges[order] == 1,
              f"the retry with the same key is sent once ({again[0]}, {upstream.charges[order]} charges)")
        text = proxy.metrics()
        check(sample(text, "idemwatch_proxy_requests_total", route="short", result="late_claim") == 1.0,
              "the given-back claim is counted late_claim")
    finally:
        holder.close()
        proxy.stop()
        upstream.shutdown()
        db.close()


def database_sessions(args: argparse.Namespace, work: pathlib.Path) -> None:
    """The proxy's sessions with the database: a request waiting on the database holds up no other
    request, and sessions the server ended while idle (a restart, a terminated backend, an idle
    timeout) are replaced before a call is sent on them, so no request is refused for it."""
    upstream = Upstream()
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    proxy = Proxy(args.proxy, args.dsn, upstream.server_address[1], work)
    db = psycopg.connect(args.dsn, autocommit=True)
    holder = psycopg.connect(args.dsn)
    try:
        held = str(uuid.uuid4())
        holder.execute("SELECT idem.begin(%s, 'payment', 'held-by-another', 'charge', NULL, 'initial', '{}')",
                       (f"POST charge {held}",))
        answer: list = []
        waiting = threading.Thread(target=lambda: answer.append(
            proxy.post("/charges/o-waits", {"amount_minor": 100}, key_header(held))))
        waiting.start()
        wait_until_blocked_by(db, holder)
        beside = [proxy.post(f"/charges/o-beside-{i}", {"amount_minor": 100}, key_header(str(uuid.uuid4())))[0]
                  for i in range(5)]
        check(beside == [201] * 5 and not answer,
              f"requests beside one waiting on the database are answered meanwhile ({beside}, {len(answer)} answered)")
        holder.rollback()
        waiting.join(30)
        check(bool(answer) and answer[0][0] == 201 and upstream.charges["o-waits"] == 1,
              f"the waiting request goes once the key is free ({answer[0][0] if answer else None}, "
              f"{upstream.charges['o-waits']} charges)")

        others = "datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid() " \
                 "AND pid <> %s"
        ended = [pid for (pid,) in db.execute(f"SELECT pid FROM pg_stat_activity WHERE {others}",
                                              (holder.info.backend_pid,)).fetchall()]
        for pid in ended:
            db.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + 30
        while db.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (ended,)).fetchone()[0]:
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        after = [proxy.post(f"/charges/o-after-end-{i}", {"amount_minor": 100}, key_header(str(uuid.uuid4())))[0]
                 for i in range(6)]
        check(len(ended) >= 2 and after == [201] * 6,
              f"sessions the server ended while idle are replaced without refusing a request "
              f"({len(ended)} ended, answers {after})")
        check(sample(proxy.metrics(), "idemwatch_proxy_requests_total", route="charge",
                     result="database_unavailable") in (None, 0.0),
              "no request was counted database_unavailable")
    finally:
        holder.close()
        proxy.stop()
        upstream.shutdown()
        db.close()


def through_pgbouncer(args: argparse.Namespace, work: pathlib.Path) -> None:
    """The proxy behind PgBouncer in transaction mode, as platforms deploy it: its calls are one
    statement each, unnamed once it sees the pooler, so its 4 sessions share 2 server connections.
    Concurrent requests under their own keys each charge once; 20 under one key charge once."""
    if not pathlib.Path("/usr/sbin/pgbouncer").exists():
        check(False, "pgbouncer (Debian package pgbouncer) is needed by this test")
        return
    server = conninfo_to_dict(args.dsn)
    folder = pathlib.Path(tempfile.mkdtemp(prefix="idemwatch-proxy-pgbouncer-"))
    folder.chmod(0o777)
    port = free_port()
    (folder / "userlist.txt").write_text(f'"{server.get("user", "postgres")}" ""\n')
    (folder / "pgbouncer.ini").write_text(f"""[databases]
* = host={server.get("host", "127.0.0.1")} port={server.get("port", 5432)}

[pgbouncer]
pool_mode = transaction
default_pool_size = 2
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {folder}/userlist.txt
pidfile = {folder}/pgbouncer.pid
logfile = {folder}/pgbouncer.log
""")
    as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    started = subprocess.run(as_owner + ["/usr/sbin/pgbouncer", "-d", str(folder / "pgbouncer.ini")],
                             capture_output=True, text=True, timeout=30)
    if started.returncode != 0:
        check(False, f"pgbouncer starts ({started.stdout}{started.stderr})")
        return
    through = {**server, "host": "127.0.0.1", "port": str(port)}
    upstream = Upstream()
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    proxy = Proxy(args.proxy, make_conninfo(**through), upstream.server_address[1], work)
    try:
        answers: list = []
        barrier = threading.Barrier(40)

        def send(order: str, key: str) -> None:
            barrier.wait()
            answers.append((order, proxy.post(f"/charges/{order}", {"amount_minor": 300}, key_header(key))))

        one_key = str(uuid.uuid4())
        threads = [threading.Thread(target=send, args=(f"o-bouncer-{i}", str(uuid.uuid4()))) for i in range(20)]
        threads += [threading.Thread(target=send, args=("o-bouncer-one", one_key)) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        own = [a for order, a in answers if order != "o-bouncer-one"]
        check(len(own) == 20 and all(a[0] == 201 for a in own)
              and all(upstream.charges[f"o-bouncer-{i}"] == 1 for i in range(20)),
              f"through PgBouncer, each key's request is sent once ({sorted(a[0] for a in own)}; "
              f"{[a[2].get('detail') for a in own if a[0] != 201]})")
        shared = collections.Counter(a[0] for order, a in answers if order == "o-bouncer-one")
        check(upstream.charges["o-bouncer-one"] == 1 and set(shared) <= {201, 409},
              f"through PgBouncer, 20 requests under one key charge once ({dict(shared)})")
        replay = proxy.post("/charges/o-bouncer-one", {"amount_minor": 300}, key_header(one_key))
        check(replay[0] == 201 and replay[1].get("idempotent-replayed") == "true",
              "through PgBouncer, a repeat replays the stored answer")
        got = sample(proxy.metrics(), "idemwatch_proxy_database_prepared_statements")
        check(got == 0, f"through PgBouncer the proxy sends a claim's calls unnamed ({got})")
    finally:
        proxy.stop()
        upstream.shutdown()
        pid = (folder / "pgbouncer.pid").read_text().strip() if (folder / "pgbouncer.pid").exists() else ""
        if pid.isdigit():
            os.kill(int(pid), signal.SIGTERM)


def fingerprints_pipelining_and_stop(args: argparse.Namespace, work: pathlib.Path) -> None:
    """A route's fingerprint leaving out a field that changes on every retry; two requests
    pipelined on one connection; a stop that cannot wait for the upstream reports the claim
    UNKNOWN at once instead of leaving it PROCESSING for its lease."""
    upstream = Upstream()
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    port = upstream.server_address[1]
    proxy = Proxy(args.proxy, args.dsn, port, work, settings="stop_grace: 1s", routes=f"""
  - name: stable
    path: /stable/{{order_id}}
    upstream: http://127.0.0.1:{port}
    biz_type: payment
    biz_id: path:order_id
    fingerprint: [method, route, "body:/amount_minor"]
  - name: patient
    path: /patient/{{order_id}}
    upstream: http://127.0.0.1:{port}
    biz_type: payment
    biz_id: path:order_id
    upstream_timeout: 30s
""")
    db = psycopg.connect(args.dsn, autocommit=True)
    try:
        key = str(uuid.uuid4())
        first = proxy.post("/stable/o-stable", {"amount_minor": 300, "sent_at": "10:00:00"}, key_header(key))
        retry = proxy.post("/stable/o-stable", {"amount_minor": 300, "sent_at": "10:00:07"}, key_header(key))
        other = proxy.post("/stable/o-stable", {"amount_minor": 900, "sent_at": "10:00:09"}, key_header(key))
        check(first[0] == 201 and retry[1].get("idempotent-replayed") == "true" and other[0] == 422
              and upstream.charges["o-stable"] == 1,
              f"a fingerprint without the retry's timestamp replays it, another amount is 422 "
              f"({first[0]}, {retry[0]}, {other[0]})")

        requests = b"".join(
            f"POST /charges/{order} HTTP/1.1\r\nHost: x\r\nIdempotency-Key: \"{uuid.uuid4()}\"\r\n"
            f"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}".encode()
            for order in ("o-pipe-1", "o-pipe-2"))
        s = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        s.sendall(requests)
        s.shutdown(socket.SHUT_WR)
        answers = read_until_closed(s, 10)
        s.close()
        check(answers.count(b"HTTP/1.1 201") == 2 and answers.index(b"o-pipe-1") < answers.index(b"o-pipe-2")
              and upstream.charges["o-pipe-1"] == 1 and upstream.charges["o-pipe-2"] == 1,
              "two pipelined requests are both answered, in order, each charged once")

        key = str(uuid.uuid4())
        waiting = threading.Thread(target=lambda: proxy.post("/patient/o-stopped", {"mode": "slow"}, key_header(key)),
                                   daemon=True)
        waiting.start()
        time.sleep(0.8)
        stopped_at = time.monotonic()
        code = proxy.stop()
        took = time.monotonic() - stopped_at
        row = db.execute("SELECT status, last_error FROM idem.records WHERE idempotency_key = %s",
                         (f"POST patient {key}",)).fetchone()
        check(code == 0 and took < 8 and row is not None and row[0] == "UNKNOWN" and "stopped" in (row[1] or ""),
              f"a stop past its grace reports a request the upstream has not answered UNKNOWN at once "
              f"(exit {code} after {took:.1f} s: {row})")
    finally:
        if proxy.process.poll() is None:
            proxy.stop()
        upstream.shutdown()
        db.close()


class KeepAliveHandler(UpstreamHandler):
    """An HTTP/1.1 upstream that keeps a connection open between requests and closes it after
    half a second idle, as servers do; it notes which connection each order came on."""

    protocol_version = "HTTP/1.1"
    timeout = 0.5

    def do_POST(self) -> None:  # noqa: N802 (the handler's API)
        with self.server.lock:
            self.server.authorization["peer " + self.path.rsplit("/", 1)[-1]] = str(self.client_address[1])
        super().do_POST()


def upstream_keepalive(args: argparse.Namespace, work: pathlib.Path) -> None:
    """upstream_keepalive: requests of a route go out on the connection the upstream kept open;
    one the upstream closed meanwhile is never written to (that request would have an unknown
    outcome), and one idle longer than the route allows is not reused. Plain and TLS."""
    cert, key = self_signed(work, "keepalive")
    plain = Upstream()
    plain.RequestHandlerClass = KeepAliveHandler
    tls = Upstream()
    tls.RequestHandlerClass = KeepAliveHandler
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    tls.socket = context.wrap_socket(tls.socket, server_side=True)
    for server in (plain, tls):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    # An upstream that follows each answer with a stray second one in the same write, keeping the
    # connection open: whatever request goes out next on that connection would read it as its own.
    stray = socket.create_server(("127.0.0.1", 0))
    stray_peers: list[int] = []

    def serve_stray() -> None:
        while True:
            try:
                conn, peer = stray.accept()
            except OSError:
                return
            stray_peers.append(peer[1])
            with conn:
                try:
                    head = b""
                    while b"\r\n\r\n" not in head:
                        head += conn.recv(65536)
                    answer = b'{"charged": true}'
                    junk = b'{"stray": true}'
                    final = (b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(answer)).encode() + b"\r\n\r\n" + answer)
                    if head.startswith(b"POST /hints/"):  # an interim answer first, then the final one
                        conn.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
                        time.sleep(0.05)
                        conn.sendall(final)
                    else:
                        conn.sendall(final + b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(junk)).encode()
                                     + b"\r\n\r\n" + junk)
                    time.sleep(1.5)
                except OSError:
                    pass
    threading.Thread(target=serve_stray, daemon=True).start()
    routes = "".join(f"""
  - name: {name}
    path: /{name}/{{order_id}}
    upstream: {url}{f"{chr(10)}    upstream_ca: {cert}" if url.startswith("https") else ""}
    upstream_keepalive: {keepalive}
    biz_type: payment
    biz_id: path:order_id""" for name, url, keepalive in [
        ("kept", f"http://127.0.0.1:{plain.server_address[1]}", "10s"),
        ("brief", f"http://127.0.0.1:{plain.server_address[1]}", "200ms"),
        ("kept-tls", f"https://localhost:{tls.server_address[1]}", "10s"),
        ("stray", f"http://127.0.0.1:{stray.getsockname()[1]}", "10s"),
        ("hints", f"http://127.0.0.1:{stray.getsockname()[1]}", "10s")])
    proxy = Proxy(args.proxy, args.dsn, plain.server_address[1], work, routes=routes + "\n")
    db = psycopg.connect(args.dsn, autocommit=True)

    def charge(route: str, order: str) -> tuple[int, str | None]:
        status, _, _ = proxy.post(f"/{route}/{order}", {"amount_minor": 100}, key_header(str(uuid.uuid4())))
        row = db.execute("SELECT status FROM idem.records WHERE biz_type = 'payment' AND biz_id = %s",
                         (order,)).fetchone()
        return status, row[0] if row else None

    def peer(upstream: Upstream, order: str) -> str | None:
        return upstream.authorization.get("peer " + order)

    try:
        for route, upstream in [("kept", plain), ("kept-tls", tls)]:
            tag = f"{route}-{uuid.uuid4().hex[:8]}"
            runs = [charge(route, f"{tag}-{i}") for i in range(3)]
            peers = {peer(upstream, f"{tag}-{i}") for i in range(3)}
            check(runs == [(201, "SUCCESS")] * 3 and len(peers) == 1,
                  f"{route}: three requests in a row go out on one upstream connection ({runs}, {peers})")
            time.sleep(1.0)  # the upstream closes the connection after 0.5 s idle
            after = charge(route, f"{tag}-after")
            check(after == (201, "SUCCESS") and upstream.charges[f"{tag}-after"] == 1
                  and peer(upstream, f"{tag}-after") not in peers,
                  f"{route}: a connection the upstream closed is not written to; the next request goes out "
                  f"on a new one and succeeds ({after})")
        tag = f"brief-{uuid.uuid4().hex[:8]}"
        first = charge("brief", f"{tag}-1")
        second = charge("brief", f"{tag}-2")
        time.sleep(0.35)  # past the route's 200 ms, within the upstream's 500 ms
        third = charge("brief", f"{tag}-3")
        check([first, second, third] == [(201, "SUCCESS")] * 3
              and peer(plain, f"{tag}-1") == peer(plain, f"{tag}-2") != peer(plain, f"{tag}-3"),
              f"a connection idle longer than upstream_keepalive is not reused "
              f"({peer(plain, f'{tag}-1')}, {peer(plain, f'{tag}-2')}, {peer(plain, f'{tag}-3')})")
        answers = [proxy.post(f"/stray/{uuid.uuid4().hex[:8]}", {}, key_header(str(uuid.uuid4())))
                   for _ in range(2)]
        check([(a[0], a[2]) for a in answers] == [(201, {"charged": True})] * 2 and len(stray_peers) == 2,
              f"a connection the upstream sent stray bytes on is not reused: each request reads its own answer "
              f"({[(a[0], a[2]) for a in answers]}, {len(stray_peers)} connection(s))")
        text = proxy.metrics()

        def connections(route: str, connection: str) -> float | None:
            return sample(text, "idemwatch_proxy_upstream_connections_total", connection=connection, route=route)
        check(connections("kept", "reused") == 2 and connections("kept", "new") == 2
              and connections("brief", "reused") == 1,
              f"the metrics count new and reused upstream connections per route "
              f"(kept: {connections('kept', 'new')} new, {connections('kept', 'reused')} reused)")
        hinted = proxy.post(f"/hints/{uuid.uuid4().hex[:8]}", {}, key_header(str(uuid.uuid4())))
        check(hinted[0] == 201 and hinted[2] == {"charged": True},
              f"an interim 103 before the upstream's answer is skipped, the final answer relayed ({hinted[0]})")

        # Expect: 100-continue: the proxy answers it before the body is sent, and does not pass it on
        # (the HTTP/1.1 upstream would answer 100 Continue itself, which is no final answer).
        order, key = f"continue-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
        body = json.dumps({"amount_minor": 100, "note": "x" * 2000}).encode()
        s = socket.create_connection(("127.0.0.1", proxy.port), timeout=3)
        s.sendall(f"POST /kept/{order} HTTP/1.1\r\nHost: x\r\nIdempotency-Key: \"{key}\"\r\nExpect: 100-continue\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode())
        try:
            interim = s.recv(4096)
        except TimeoutError:
            interim = b""
        s.sendall(body)
        s.shutdown(socket.SHUT_WR)
        final = read_until_closed(s, 10)
        s.close()
        stored = db.execute("SELECT status, response_payload FROM idem.records WHERE idempotency_key = %s",
                            (f"POST kept {key}",)).fetchone()
        check(interim.startswith(b"HTTP/1.1 100 Continue") and b"HTTP/1.1 201" in final
              and plain.charges[order] == 1 and stored is not None and stored[0] == "SUCCESS"
              and stored[1].get("status") == 201,
              f"Expect: 100-continue is answered by the proxy, the upstream's 201 recorded and relayed "
              f"({interim[:30]!r}, {final[:20]!r}, {stored and (stored[0], stored[1].get('status'))})")
    finally:
        proxy.stop()
        plain.shutdown()
        tls.shutdown()
        stray.close()
        db.close()


def verdict(name: str, work: pathlib.Path) -> int:
    """The exit status of a run whose checks went through check(): 1 when one failed."""
    if FAILURES:
        print(f"{name}: {len(FAILURES)} check(s) failed; logs in {work}")
        return 1
    print(f"{name}: every check held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
