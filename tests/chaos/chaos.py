#!/usr/bin/env python3
"""The bank test: the whole system under every fault at once, then the books checked.

Simulated agents (several `idemctl simulate` processes, every fault and careless clients on) write
through a TCP fault layer of our own that resets and stalls connections mid-stream; an operator
settles, the lease sweep and the reconciler run throughout; exporters are scraped every second;
PostgreSQL is crashed (`pg_ctl -m immediate`) and restarted; simulators, the reconciler and the
exporters are killed with SIGKILL and restarted. Then every simulator finishes its plan once more
without faults, as restarted agents retry everything, and the books are checked from SQL, from
the downstream's own records (each simulator's journal) and from the exporters:

  1. side effects to operations 1 : 1 for every business type: no operation's side effect ran
     twice (the buggy downstream's deliberate doubles and careless clients aside, each flagged);
  2. every SUCCESS record's side effect happened once; no FAILED record's side effect happened
     (nobody declared FAILED what had happened, so nothing ran again);
  3. the ledger holds exactly what the downstream did: no forged flow, no movement missing;
  4. every transition is one the state machine allows, and no record left UNKNOWN was claimed again
     without a decision by evidence or a person;
  5. every careless attempt was refused;
  6. every exporter's counters equal SQL, and none found rows it had counted missing after a
     crash or a failover (which would mean PostgreSQL lost writes it had acknowledged).

`--reintroduce NAME` breaks one guarantee on purpose after migrating, to prove the run can fail:
`refund-read-as-charge` and `coupon-read-as-charge` (the ledger's word about a refund or a coupon
is read as if it were a charge's, as before business types declared their side effects),
`writers-record-ledger` (any writer may record the gateway's word). Exit 0 when every check holds,
1 when one fails (each failure printed), 2 when the run itself could not be set up;
`--ha sync|async` runs it all on three PostgreSQL nodes under Patroni (scripts/ha), each PostgreSQL
crash a failover just after the replicas fell behind, every second one a partition of the leader
from etcd instead: asynchronously replicated, acknowledged claims are lost and their side effects
run twice, which the checks find. `--expect-to-fail`
turns 0 and 1 around.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import pathlib
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import psycopg

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts" / "lib"))
import ha_nodes  # noqa: E402  (scripts/lib/ha_nodes.py)

ROLES = {
    "chaos_agent": "idem_writer",
    "chaos_gateway": "idem_ledger",
    "chaos_olga": "idem_operator",
    "chaos_recon": "idem_reconciler",
    "chaos_reader": "idem_reader",
}

REINTRODUCED = {
    "refund-read-as-charge": "UPDATE idem.business_types SET effect_kinds = '{DEBIT,CAPTURE}', "
    "reversal_kinds = '{REFUND}' WHERE biz_type = 'refund'",
    "coupon-read-as-charge": "UPDATE idem.business_types SET effect_kinds = '{DEBIT,CAPTURE}' "
    "WHERE biz_type = 'coupon'",
    "writers-record-ledger": "GRANT EXECUTE ON FUNCTION "
    "idem.record_fund_flow(text, text, text, bigint, text, text, text) TO idem_writer",
}


def say(*words: object) -> None:
    print("chaos:", *words, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A throwaway PostgreSQL cluster, run as the postgres user when we are root."""

    def __init__(self, pg_bin: pathlib.Path, work: pathlib.Path):
        self.pg_bin, self.dir = pg_bin, work / "pg"
        self.data, self.sock = self.dir / "data", self.dir / "sock"
        self.port = free_port()
        self.dir.mkdir(parents=True)
        self.sock.mkdir()
        if os.getuid() == 0:
            shutil.chown(work, "postgres")
            for p in (self.dir, self.sock):
                shutil.chown(p, "postgres")
        self._as_owner(self.pg_bin / "initdb", "-D", self.data, "-U", "postgres", "--auth=trust",
                       "--encoding=UTF8", "--locale=C.UTF-8", quiet=True)

    def _as_owner(self, *argv: object, quiet: bool = False) -> None:
        cmd = [str(a) for a in argv]
        if os.getuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--"] + cmd
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL if quiet else None,
                       stderr=subprocess.STDOUT if quiet else None)

    def start(self) -> None:
        opts = (f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c max_connections=200 "
                "-c fsync=off -c full_page_writes=off")
        self._as_owner(self.pg_bin / "pg_ctl", "-D", self.data, "-l", self.dir / "postgres.log", "-w",
                       "-t", "120", "start", "-o", opts, quiet=True)

    def crash(self) -> None:
        self._as_owner(self.pg_bin / "pg_ctl", "-D", self.data, "-m", "immediate", "stop", quiet=True)

    def stop(self) -> None:
        try:
            self._as_owner(self.pg_bin / "pg_ctl", "-D", self.data, "-m", "fast", "stop", quiet=True)
        except subprocess.CalledProcessError:
            pass

    def dsn(self, user: str = "postgres", port: int | None = None) -> str:
        if port is None:
            return f"host={self.sock} port={self.port} dbname=chaos user={user}"
        return f"host=127.0.0.1 port={port} dbname=chaos user={user} connect_timeout=5"


class HaCluster:
    """Three PostgreSQL nodes under Patroni with etcd and HAProxy (scripts/ha), replicated
    synchronously or not. A crash here is a failover: the replicas fall a moment behind (the
    leader's WAL senders stopped for half a second while the agents keep writing), then the
    leader's postmaster and every process it started are killed with SIGKILL and a replica takes
    over. With synchronous replication the leader cannot
    acknowledge a commit in that moment; without it, what it acknowledged then is lost."""

    def __init__(self, script: pathlib.Path, work: pathlib.Path, synchronous: bool):
        self.script, self.synchronous = script, synchronous
        self.dir = work / "ha"
        self.env = dict(os.environ, IDEMWATCH_HA_DIR=str(self.dir))
        self.up = False
        self.failover_seconds: list[float] = []
        if os.getuid() == 0:
            shutil.chown(work, "postgres")

    def _script(self, *argv: str) -> str:
        return subprocess.run(["bash", str(self.script), *argv], env=self.env, check=True,
                              stdout=subprocess.PIPE, text=True).stdout

    def start(self) -> None:
        if self.up:
            return
        self._script("up", *([] if self.synchronous else ["--async"]))
        self.ports = ha_nodes.ports(self.dir)
        self.port = int(self.ports["HA_RW"])
        self.up = True

    def nodes(self) -> list[str]:
        return ha_nodes.nodes(self.ports)

    def leader(self) -> str | None:
        return ha_nodes.leader(self.ports)

    def _node_sql(self, node: str, query: str) -> list[tuple]:
        dsn = f"host=127.0.0.1 port={self.ports['HA_PG_' + node]} user=postgres dbname=postgres connect_timeout=2"
        with psycopg.connect(dsn, autocommit=True) as c:
            return c.execute(query).fetchall()

    def replicated(self, timeout: float = 60) -> None:
        """Waits until every replica streams from the leader again (replicated synchronously, one
        of them the synchronous standby): a failover soon after the last one would otherwise find
        the replicas still rejoining (pg_rewind, a restart), none that Patroni may promote. A
        replica that lost its way (asynchronous replication diverged) may never come back: at the
        deadline the failover goes ahead and says so."""
        deadline = time.monotonic() + timeout
        want = len(self.nodes()) - 1
        while True:
            leader = self.leader()
            try:
                if leader is not None:
                    ((streaming, synchronous),) = self._node_sql(
                        leader, "SELECT count(*) FILTER (WHERE state = 'streaming'), "
                                "count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')) "
                                "FROM pg_stat_replication")
                    if streaming >= want and (synchronous > 0 or not self.synchronous):
                        return
            except psycopg.Error:
                pass
            if time.monotonic() > deadline:
                say(f"not every replica streams from the leader after {timeout:.0f} s: failing over anyway")
                return
            time.sleep(0.5)

    def crash(self, lag_first: bool = True) -> None:
        self.replicated()
        old = self.leader()
        if old is None:
            raise OSError("no leader to fail over from")
        senders = []
        if lag_first:
            # The leader's WAL senders stopped, so what it writes from now on reaches no replica.
            senders = [pid for (pid,) in self._node_sql(old, "SELECT pid FROM pg_stat_replication")]
            for pid in senders:
                os.kill(pid, signal.SIGSTOP)
            time.sleep(0.5)
        pid = int((self.dir / old / "data" / "postmaster.pid").read_text().split()[0])
        victims = ha_nodes.postmaster_and_children(pid)
        killed = time.monotonic()
        for victim in victims:
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                pass
        # Failover time: from the kill to the first write committed through the read-write port.
        deadline = killed + 90
        while True:
            try:
                with psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres "
                                     "connect_timeout=2", autocommit=True) as c:
                    c.execute("SET statement_timeout = '3s'")
                    c.execute("SELECT pg_current_xact_id()")
                break
            except psycopg.Error:
                if time.monotonic() > deadline:
                    raise OSError(f"no leader took over within 90 s of killing {old}")
                time.sleep(0.2)
        self.failover_seconds.append(time.monotonic() - killed)
        new = self.leader()
        what = f"failover from {old} to {new}" if new != old else \
            f"{old} recovered in place (no synchronous standby could take over)"
        say(f"{what}: first committed write after {self.failover_seconds[-1]:.1f} s")

    def partition(self) -> None:
        """The leader cut off from etcd, as a network partition would (no iptables here): its
        Patroni stopped with SIGSTOP, so its leader lease runs out while its PostgreSQL runs on; a
        replica takes over, and the old leader, its Patroni resumed, rejoins as a replica."""
        self.replicated()
        old = self.leader()
        if old is None:
            raise OSError("no leader to cut off")
        pids = [int(pid) for pid in subprocess.run(
            ["pgrep", "-f", f"patroni {self.dir / old}.yml"], stdout=subprocess.PIPE, text=True).stdout.split()]
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            while True:
                new = self.leader()
                if new is not None and new != old:
                    break
                if time.monotonic() - stopped > 60:
                    # Patroni on this one machine sometimes elects no replica (none it deems a
                    # synchronous candidate); the partition heals instead, and the run goes on.
                    say(f"partition: no replica took over within 60 s of cutting {old} off; "
                        "its Patroni resumes")
                    return
                time.sleep(0.2)
            self.failover_seconds.append(time.monotonic() - stopped)
            say(f"partition: {old} cut off from etcd, {new} leader after {self.failover_seconds[-1]:.1f} s")
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.up:
            subprocess.run(["bash", str(self.script), "down"], env=self.env, stdout=subprocess.DEVNULL)
            self.up = False

    def keep_logs(self, dest: pathlib.Path, tail: int = 40) -> None:
        """Copies etcd's, HAProxy's and each node's log (Patroni's and its PostgreSQL's) to DEST
        before `down` deletes them, and prints each node log's last lines, so a failed run on a
        machine that is gone (CI) still shows what the cluster did."""
        if not self.up:
            return
        dest.mkdir(parents=True, exist_ok=True)
        for log in sorted(self.dir.glob("*.log")):
            shutil.copy(log, dest)
            if log.stem in self.nodes():
                say(f"last {tail} lines of {log.name}:")
                for line in log.read_text(errors="replace").splitlines()[-tail:]:
                    print("   ", line, flush=True)
        say("cluster logs kept in", dest)

    def dsn(self, user: str = "postgres", port: int | None = None) -> str:
        if port is not None:
            return f"host=127.0.0.1 port={port} dbname=chaos user={user} connect_timeout=5"
        hosts = ",".join("127.0.0.1" for _ in self.nodes()) if self.up else "127.0.0.1"
        ports = ",".join(self.ports["HA_PG_" + n] for n in self.nodes()) if self.up else "0"
        return (f"host={hosts} port={ports} dbname=chaos user={user} connect_timeout=5 "
                "target_session_attrs=read-write")


class FaultProxy:
    """A TCP layer between the agents and PostgreSQL that resets connections mid-stream (a hard RST
    after a random number of bytes) and now and then stalls a chunk, on a thread of its own."""

    def __init__(self, target_port: int, seed: int):
        self.target_port, self.port = target_port, free_port()
        self.rng = random.Random(seed)
        self.enabled = True
        self.resets = 0
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.ready = threading.Event()
        self.thread.start()
        self.ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        self.ready.set()
        self.loop.run_forever()
        server.close()

    @staticmethod
    def _reset(writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        writer.transport.abort()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            self._reset(writer)
            return
        budget = [int(self.rng.expovariate(1 / 400_000))]

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while True:
                    chunk = await src.read(16384)
                    if not chunk:
                        break
                    if self.enabled:
                        budget[0] -= len(chunk)
                        if budget[0] < 0:
                            self.resets += 1
                            break
                        if self.rng.random() < 0.002:
                            await asyncio.sleep(self.rng.uniform(0.2, 1.5))
                    dst.write(chunk)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                self._reset(writer)
                self._reset(up_writer)

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


class Process:
    """A program we start, kill with SIGKILL and start again, logging to a file."""

    def __init__(self, name: str, argv: list[str], log: pathlib.Path):
        self.name, self.argv, self.log = name, argv, log
        self.proc: subprocess.Popen | None = None
        self.kills = 0
        self.outputs: list[str] = []

    def start(self) -> None:
        self.out = open(self.log, "a")
        self.out.write(f"--- start {time.strftime('%H:%M:%S')}\n")
        self.out.flush()
        self.proc = subprocess.Popen(self.argv, stdout=self.out, stderr=subprocess.STDOUT)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.kills += 1

    def stop(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


def scrape(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            return r.read().decode()
    except OSError:
        return None


SAMPLE = re.compile(r'^(\w+)\{([^}]*)\} (\S+)$')


def counters(text: str, name: str) -> dict[tuple, float]:
    out = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m and m.group(1) == name:
            labels = tuple(sorted(re.findall(r'(\w+)="([^"]*)"', m.group(2))))
            out[labels] = float(m.group(3))
    return out


def journal(path: pathlib.Path) -> list[dict]:
    rows = []
    if not path.exists():
        return rows
    for line in path.read_text().splitlines():
        f = line.split("\t")
        if len(f) not in (7, 8):  # the eighth field, when it was made, came later
            continue  # cut short by a kill: it never happened
        rows.append(dict(key=f[0], biz_type=f[1], biz_id=f[2], kind=None if f[3] == "-" else f[3],
                         amount=int(f[4]), ref=f[5], deliberate=f[6] == "1"))
    return rows


class Run:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.rng = random.Random(args.seed)
        self.work = pathlib.Path(tempfile.mkdtemp(prefix="idemwatch-chaos-", dir="/tmp"))
        self.failures: list[str] = []
        self.broken = False  # the run itself could not go on
        if args.ha:
            script = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "ha"
            self.cluster = HaCluster(script, self.work, args.ha == "sync")
        else:
            self.cluster = Cluster(pathlib.Path(args.pg_bin), self.work)
        self.processes: list[Process] = []

    def check(self, ok: bool, what: str) -> None:
        say(("ok      " if ok else "FAILED  ") + what)
        if not ok:
            self.failures.append(what)

    def sql(self, query: str, *params: object) -> list[tuple]:
        with psycopg.connect(self.cluster.dsn(), autocommit=True) as c:
            return c.execute(query, params or None).fetchall()

    def setup(self) -> None:
        self.cluster.start()
        with psycopg.connect(self.cluster.dsn().replace("dbname=chaos", "dbname=postgres"), autocommit=True) as c:
            c.execute("CREATE DATABASE chaos")
        subprocess.run([self.args.idemctl, "migrate", "--db.dsn", self.cluster.dsn()], check=True,
                       stdout=subprocess.DEVNULL)
        with psycopg.connect(self.cluster.dsn(), autocommit=True) as c:
            for login, group in ROLES.items():
                c.execute(f"CREATE ROLE {login} LOGIN IN ROLE {group}")
            if self.args.isolation != "read committed":
                c.execute(f"ALTER ROLE chaos_agent SET default_transaction_isolation = '{self.args.isolation}'")
            if self.args.reintroduce:
                c.execute(REINTRODUCED[self.args.reintroduce])
                say("reintroduced on purpose:", self.args.reintroduce)
        self.proxy = FaultProxy(self.cluster.port, self.args.seed)
        say(f"PostgreSQL on port {self.cluster.port}, fault proxy on {self.proxy.port}, work in {self.work}")

    def simulator(self, n: int, faults: bool) -> list[str]:
        through = self.proxy.port
        argv = [
            self.args.idemctl, "simulate", "--quiet",
            "--db.dsn", self.cluster.dsn("chaos_agent", through),
            "--ledger-dsn", self.cluster.dsn("chaos_gateway", through),
            "--operator-dsn", self.cluster.dsn("chaos_olga"),
            "--reconciler-dsn", self.cluster.dsn("chaos_recon"),
            "--run-id", f"chaos{n}", "--seed", str(self.args.seed + n),
            "--requests", str(self.args.operations), "--agents", "3",
            "--biz-types", "payment,refund,coupon,payout",
            "--downstream-journal", str(self.work / f"journal-{n}.tsv"),
            "--downstream-latency", "15ms", "--lease", "2s",
            "--expire-leases-every", "700ms", "--settle-every", "1500ms", "--reconcile-every", "2s",
            "--gateway-report-every", "300ms",
        ]
        if faults:
            argv += ["--response-loss-rate", "0.12", "--crash-rate", "0.04", "--decline-rate", "0.03",
                     "--refused-rate", "0.03", "--double-charge-rate", "0.02", "--careless-rate", "0.05",
                     "--concurrent-duplicate-rate", "0.05", "--callback-resolves-rate", "0.4"]
        else:
            # The agents restarted for good: no new faults; they retry every operation of the plan.
            for rate in ("response-loss", "crash", "decline", "refused", "double-charge", "careless",
                         "concurrent-duplicate", "llm-retry", "framework-retry", "http-retry",
                         "callback", "mismatch", "new-key"):
                argv += [f"--{rate}-rate", "0"]
        return argv

    def chaos(self) -> None:
        sims = [Process(f"simulate-{n}", self.simulator(n, True), self.work / f"simulate-{n}.log")
                for n in range(self.args.simulators)]
        recon = Process("reconcile", [self.args.idemctl, "reconcile", "--every", "1s", "--db.dsn",
                                      self.cluster.dsn("chaos_recon")], self.work / "reconcile.log")
        self.exporter_ports = [free_port() for _ in range(self.args.exporters)]
        exporters = [Process(f"exporter-{i}", [self.args.exporter, "--db.dsn", self.cluster.dsn("chaos_reader"),
                                               "--web.listen-address", f"127.0.0.1:{port}",
                                               "--collect-interval", "1s"],
                             self.work / f"exporter-{i}.log")
                     for i, port in enumerate(self.exporter_ports)]
        self.processes = sims + [recon] + exporters
        for p in self.processes:
            p.start()
        scrapes = collections.Counter()
        crashes_left = self.args.pg_crashes
        end = time.monotonic() + self.args.duration
        next_fault = time.monotonic() + self.rng.uniform(2, 5)
        # On a replicated cluster the failovers come at set moments, spread over the run.
        failovers = [end - self.args.duration * (1 - (i + 1) / (crashes_left + 1)) for i in range(crashes_left)] \
            if self.args.ha else []
        while time.monotonic() < end:
            time.sleep(1)
            for port in self.exporter_ports:
                scrapes["answered" if scrape(port) is not None else "unanswered"] += 1
            for p in sims:
                if not p.alive():  # its plan is done: it starts over, as a restarted agent does
                    p.start()
            if failovers and time.monotonic() >= failovers[0]:
                failovers.pop(0)
                crashes_left -= 1
                # Every second failover is a partition of the leader from etcd instead of a kill.
                if (self.args.pg_crashes - crashes_left) % 2 == 0:
                    self.cluster.partition()
                else:
                    say("the replicas fall behind, then kill -9 the leader's postmaster")
                    self.cluster.crash()
                continue
            if time.monotonic() < next_fault:
                continue
            next_fault = time.monotonic() + self.rng.uniform(2, 6)
            choice = self.rng.choice(["simulator", "simulator", "reconciler", "exporter", "postgres"])
            if choice == "postgres" and crashes_left > 0 and not self.args.ha:
                crashes_left -= 1
                say("crash PostgreSQL (pg_ctl -m immediate)")
                self.cluster.crash()
                time.sleep(self.rng.uniform(1, 3))
                self.cluster.start()
            elif choice == "reconciler":
                say("kill -9 the reconciler")
                recon.kill()
                recon.start()
            elif choice == "exporter":
                victim = self.rng.choice(exporters)
                say("kill -9", victim.name)
                victim.kill()
                time.sleep(0.5)
                victim.start()
            else:
                victim = self.rng.choice(sims)
                say("kill -9", victim.name)
                victim.kill()
                time.sleep(self.rng.uniform(0.2, 1.5))
                victim.start()
        self.scrapes = scrapes
        say(f"chaos over after {self.args.duration} s: {self.proxy.resets} connections reset, "
            f"{self.args.pg_crashes - crashes_left} PostgreSQL crashes, "
            + ", ".join(f"{p.name} killed {p.kills}x" for p in self.processes if p.kills))
        for p in sims:
            p.stop()  # SIGTERM: each prints the summary of its last run, careless attempts included
        recon.stop()
        self.proxy.enabled = False
        self.exporters = exporters

    def settled(self) -> None:
        """Waits until the database has answered a write five times in a row, a second apart: after
        a partition the old leader rejoins and the new one may restart while the run ends."""
        deadline, answered = time.monotonic() + 90, 0
        while answered < 5:
            try:
                self.sql("SELECT pg_current_xact_id()")
                answered += 1
            except psycopg.Error:
                if time.monotonic() > deadline:
                    raise
                answered = 0
            time.sleep(1)

    def finish(self) -> None:
        """Every simulator once more, without new faults: the restarted agents retry every operation
        of their plan, the gateway reports all it did, the operator and the reconciler decide. The
        exporters start afresh at this quiet moment (nothing in flight), so what each counts from
        here on is known from SQL; PostgreSQL crashes once more while they count."""
        self.settled()
        subprocess.run([self.args.idemctl, "expire-leases", "--db.dsn", self.cluster.dsn()], check=True,
                       stdout=subprocess.DEVNULL)
        for e in self.exporters:
            e.kill()
            e.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(
                "idempotency_exporter_db_up 1" in (scrape(p) or "") for p in self.exporter_ports):
            time.sleep(0.5)
        self.boundary = {t: self.sql(f"SELECT coalesce(max(id), 0) FROM idem.{t}")[0][0]
                         for t in ("attempts", "fund_flows", "transitions")}
        recon = Process("reconcile-final", [self.args.idemctl, "reconcile", "--every", "1s", "--db.dsn",
                                            self.cluster.dsn("chaos_recon")], self.work / "reconcile.log")
        recon.start()
        self.processes.append(recon)
        final = [Process(f"final-{n}", self.simulator(n, False), self.work / f"final-{n}.log")
                 for n in range(self.args.simulators)]
        for p in final:
            p.start()
        if self.args.pg_crashes > 0:
            time.sleep(2)
            if self.args.ha:
                # A plain failover: a commit the old leader made visible while its synchronous
                # standby had not yet confirmed it could be counted and then lost.
                say("kill -9 the leader's postmaster while the exporters count")
                self.cluster.crash(lag_first=False)
            else:
                say("crash PostgreSQL (pg_ctl -m immediate) while the exporters count")
                self.cluster.crash()
            time.sleep(1.5)
            self.cluster.start()
        self.summaries = []
        for n, p in enumerate(final):
            for attempt in range(4):  # a run the crash cut short runs again, as an agent restarts
                p.proc.wait(timeout=600)
                if p.proc.returncode == 0 or attempt == 3:
                    break
                p.start()
            self.summaries.append((n, p.proc.returncode, (self.work / f"final-{n}.log").read_text()))
        recon.stop()
        self.settled()
        subprocess.run([self.args.idemctl, "reconcile", "--db.dsn", self.cluster.dsn("chaos_recon")],
                       check=True, stdout=subprocess.DEVNULL)
        # The exporters collect what came last: after the crash they may still be in their
        # reconnect back-off (1 s doubling), so wait until every one agrees with SQL or a minute
        # has passed. A counter never goes down: one that counted a row twice never agrees.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            states = self.exporter_differences()
            if all(d is not None and not any(differ for _, differ in d.values()) for d in states):
                break
            time.sleep(1)

    def exporter_differences(self) -> list:
        """For each exporter, per counter: the rows SQL counts since the boundary and the series
        where the exporter's figure differs from SQL's (None: the exporter does not answer)."""
        b = self.boundary
        truth = {
            "idempotency_requests_total": (("biz_type", "source", "outcome"), self.sql(
                "SELECT biz_type, trigger_source, outcome, count(*) FROM idem.attempts WHERE id > %s "
                "GROUP BY 1, 2, 3", b["attempts"])),
            "idempotency_fund_flows_total": (("biz_type", "kind"), self.sql(
                "SELECT biz_type, kind, count(*) FROM idem.fund_flows WHERE id > %s GROUP BY 1, 2",
                b["fund_flows"])),
            "idempotency_transitions_total": (("from", "to", "actor_kind"), self.sql(
                "SELECT coalesce(from_status, 'none'), to_status, actor_kind, count(*) "
                "FROM idem.transitions WHERE id > %s GROUP BY 1, 2, 3", b["transitions"])),
        }
        out = []
        for port in self.exporter_ports:
            text = scrape(port)
            if text is None:
                out.append(None)
                continue
            differences = {}
            for name, (labels, rows) in truth.items():
                want = {tuple(sorted(zip(labels, r[:-1]))): float(r[-1]) for r in rows}
                got = {k: v for k, v in counters(text, name).items() if v != 0}
                differences[name] = (sum(want.values()), sorted(set(want.items()) ^ set(got.items())))
            out.append(differences)
        return out

    def verify(self) -> None:
        effects = [e for n in range(self.args.simulators) for e in journal(self.work / f"journal-{n}.tsv")]
        by_key = collections.defaultdict(list)
        for e in effects:
            by_key[e["key"]].append(e)
        say(f"the downstream made {len(effects)} side effects under {len(by_key)} keys")
        types = collections.Counter(e["biz_type"] for e in effects)
        self.check(all(types[t] > 0 for t in ("payment", "refund", "coupon", "payout")),
                   f"side effects of every business type happened ({dict(types)})")

        twice = sorted(k for k, es in by_key.items() if sum(not e["deliberate"] for e in es) > 1)
        self.check(not twice, f"no operation's side effect ran twice ({len(twice)} did: {twice[:5]})")
        by_object = collections.Counter((e["biz_type"], e["biz_id"]) for e in effects if not e["deliberate"])
        twice = sorted(o for o, n in by_object.items() if n > 1)
        self.check(not twice, f"no business object's side effect happened twice, under any key "
                              f"({len(twice)} did: {twice[:5]})")
        flagged = sum(e["deliberate"] for e in effects)
        (duplicates,) = self.sql("SELECT count(*) FROM idem.fund_flows WHERE biz_id LIKE 'chaos%' "
                                 "AND duplicate_of IS NOT NULL")[0]
        money_doubles = sum(e["deliberate"] and e["kind"] is not None for e in effects)
        self.check(duplicates == money_doubles,
                   f"the buggy downstream's {flagged} deliberate doubles are each flagged a duplicate "
                   f"in the ledger ({duplicates} flagged, {money_doubles} moved money)")

        records = {k: s for k, s in self.sql("SELECT idempotency_key, status FROM idem.records "
                                             "WHERE biz_id LIKE 'chaos%'")}
        # An agent acts only on a claim acknowledged `executed`: a side effect under a key with no
        # record is a claim the database acknowledged and then lost.
        lost = sorted(k for k in by_key if k not in records)
        self.check(not lost, f"every claim an agent acted on is still recorded ({len(lost)} lost: {lost[:5]})")
        success_without = sorted(k for k, s in records.items()
                                 if s == "SUCCESS" and sum(not e["deliberate"] for e in by_key.get(k, [])) != 1)
        self.check(not success_without,
                   f"every SUCCESS record's side effect happened exactly once ({len(success_without)} "
                   f"did not: {success_without[:5]})")
        failed_but_done = sorted(k for k, s in records.items()
                                 if s == "FAILED" and any(not e["deliberate"] for e in by_key.get(k, [])))
        self.check(not failed_but_done,
                   f"no FAILED record's side effect happened ({len(failed_but_done)}: {failed_but_done[:5]})")
        settled = collections.Counter(records.values())
        say("records:", dict(settled))

        ledger = {ref: (by, key) for ref, by, key in self.sql(
            "SELECT external_ref, recorded_by, idempotency_key FROM idem.fund_flows WHERE biz_id LIKE 'chaos%'")}
        made = {e["ref"] for e in effects if e["kind"]}
        forged = sorted(set(ledger) - made)
        missing = sorted(made - set(ledger))
        self.check(not forged, f"every flow in the ledger is one the downstream made ({len(forged)} "
                               f"are not: {forged[:5]})")
        self.check(not missing, f"every movement the downstream made is in the ledger ({len(missing)} "
                                f"missing: {missing[:5]})")
        say("flows by recorder:", dict(collections.Counter(by for by, _ in ledger.values())))

        (bad,) = self.sql("SELECT count(*) FROM idem.transitions "
                          "WHERE NOT idem.transition_allowed(from_status, to_status, actor_kind)")[0]
        self.check(bad == 0, f"every transition is one the state machine allows ({bad} are not)")
        (reclaimed,) = self.sql("""
            SELECT count(*) FROM idem.transitions t
             WHERE t.from_status = 'FAILED' AND t.to_status = 'PROCESSING'
               AND EXISTS (SELECT 1 FROM idem.transitions u
                            WHERE u.idempotency_key = t.idempotency_key AND u.id < t.id
                              AND u.to_status = 'UNKNOWN'
                              AND NOT EXISTS (SELECT 1 FROM idem.transitions d
                                               WHERE d.idempotency_key = t.idempotency_key
                                                 AND d.id > u.id AND d.id < t.id
                                                 AND d.actor_kind IN ('operator', 'reconciler')))""")[0]
        self.check(reclaimed == 0, f"no record was claimed again after UNKNOWN without a decision by "
                                   f"evidence or a person ({reclaimed} were)")

        tried = refused = 0
        for log in sorted(self.work.glob("simulate-*.log")) + sorted(self.work.glob("final-*.log")):
            for m in re.finditer(r"tried (\d+), refused (\d+)", log.read_text()):
                tried, refused = tried + int(m.group(1)), refused + int(m.group(2))
        self.check(tried > 0 and tried == refused,
                   f"every careless attempt was refused ({refused} of {tried}, from every summary printed)")
        for n, code, text in self.summaries:
            self.check(code == 0, f"simulator {n} finished its plan (exit {code})")

        for i, differences in enumerate(self.exporter_differences()):
            if differences is None:
                self.check(False, f"exporter {i} answers at the end")
                continue
            for name, (rows, differ) in differences.items():
                self.check(not differ, f"exporter {i}: every {name} series equals SQL "
                                       f"({rows:.0f} rows; differ: {differ[:3]})")
        for i, port in enumerate(self.exporter_ports):
            # After every crash and failover the exporter looks up the rows it counted last on the
            # server it reaches: one missing means PostgreSQL lost a write it had acknowledged.
            text = scrape(port) or ""
            m = re.search(r"^idempotency_exporter_count_restarts_total (\S+)$", text, re.M)
            restarts = float(m.group(1)) if m else None
            self.check(restarts == 0, f"exporter {i} found every row it had counted on the server "
                                      f"it reached after each crash (count restarts: {restarts})")
        say(f"scrapes during the chaos: {self.scrapes['answered']} answered, "
            f"{self.scrapes['unanswered']} unanswered")
        if self.args.ha:
            # The leader as idemctl doctor sees it: replicated, so a synchronous standby is due. A
            # replica that just came back may take a few seconds to be chosen again.
            deadline, finding = time.monotonic() + 30, ""
            while True:
                out = subprocess.run([self.args.idemctl, "doctor", "--db.dsn", self.cluster.dsn()],
                                     stdout=subprocess.PIPE, text=True).stdout
                finding = next((line for line in out.splitlines() if "synchronous_standby:" in line), out)
                if finding.startswith("ok") or time.monotonic() > deadline:
                    break
                time.sleep(1)
            self.check(finding.startswith("ok"), f"idemctl doctor finds a synchronous standby ({finding})")
            say("failovers, kill to the first committed write: "
                + ", ".join(f"{t:.1f} s" for t in self.cluster.failover_seconds))

    def close(self) -> None:
        for p in self.processes:
            p.kill()
        if hasattr(self, "proxy"):
            self.proxy.close()
        unexpected = self.broken or (self.failures and not self.args.expect_to_fail)
        if unexpected and isinstance(self.cluster, HaCluster):
            self.cluster.keep_logs(self.work / "cluster-logs")
        self.cluster.stop()
        if not self.failures and not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        else:
            say("work kept in", self.work)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idemctl", required=True)
    parser.add_argument("--exporter", required=True)
    parser.add_argument("--pg-bin", required=True, help="PostgreSQL's bin folder (initdb, pg_ctl)")
    parser.add_argument("--duration", type=int, default=60, help="seconds of chaos (default 60)")
    parser.add_argument("--operations", type=int, default=1200, help="operations in each simulator's plan")
    parser.add_argument("--simulators", type=int, default=2)
    parser.add_argument("--exporters", type=int, default=2)
    parser.add_argument("--pg-crashes", type=int, default=2,
                        help="PostgreSQL crashes; with --ha, failovers, evenly spread over the run")
    parser.add_argument("--ha", choices=["sync", "async"],
                        help="run on a replicated cluster (scripts/ha), replicated synchronously or not")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--isolation", default="read committed",
                        choices=["read committed", "repeatable read", "serializable"],
                        help="the agents' default_transaction_isolation")
    parser.add_argument("--reintroduce", choices=sorted(REINTRODUCED), help="break one guarantee on purpose")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--expect-to-fail", action="store_true",
                        help="exit 0 when a check fails (with --reintroduce: the run caught it), 1 when all hold")
    args = parser.parse_args()
    run = Run(args)
    try:
        run.setup()
        run.chaos()
        run.finish()
        run.verify()
    except (OSError, subprocess.SubprocessError, psycopg.Error) as e:
        say("could not run:", e)
        run.failures.append(f"could not run: {e}")
        run.broken = True
        run.close()
        return 2
    run.close()
    if run.failures:
        say(f"{len(run.failures)} check(s) failed")
        if args.expect_to_fail:
            say("as expected: the run caught the hole it was set up to show")
            return 0
        return 1
    say("every check held")
    return 1 if args.expect_to_fail else 0


if __name__ == "__main__":
    sys.exit(main())
