#!/usr/bin/env python3
"""A leader left without a standby never acknowledges a claim.

On three PostgreSQL nodes under Patroni (scripts/ha, synchronous replication), both replicas die
(their Patroni frozen with SIGSTOP so nothing restarts them, their postmasters killed with SIGKILL)
while the leader runs on. A claim (`idem.begin`) then sent to the leader must wait: acknowledged
now, it would exist on the leader alone, and a leader that was already deposed (cut off from etcd
while a replica took over, the case this guards) would lose it at its demotion, after its agent
had been told `executed`; the retry would find no record and run the side effect again. Patroni's
`synchronous_mode_strict` is what keeps the leader waiting: without it Patroni empties
`synchronous_standby_names` when no standby is left, and the leader acknowledges alone. When the
replicas come back the waiting claim is acknowledged, and a replica holds it.

  lone_leader.py --idemctl IDEMCTL [--not-strict --expect-to-fail]

`--not-strict` turns `synchronous_mode_strict` off first (what scripts/ha did before it set it):
the run must then find the claim acknowledged alone. Exit 0 when every check holds, 1 when one
fails, 2 when the run could not be set up; `--expect-to-fail` turns 0 and 1 around.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import psycopg

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts" / "lib"))
import ha_nodes  # noqa: E402  (scripts/lib/ha_nodes.py)

HA_SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "ha"
WAIT_ALONE = 6.0  # seconds a claim must stay unacknowledged while the leader is alone


def say(*words: object) -> None:
    print("lone leader:", *words, flush=True)


class Run:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.work = pathlib.Path(tempfile.mkdtemp(prefix="idemwatch-lone-leader-"))
        if os.getuid() == 0:
            shutil.chown(self.work, "postgres")
        self.dir = self.work / "ha"
        self.env = dict(os.environ, IDEMWATCH_HA_DIR=str(self.dir))
        self.failures: list[str] = []
        self.frozen: list[int] = []

    def check(self, ok: bool, what: str) -> None:
        say("ok  " if ok else "FAIL", what)
        if not ok:
            self.failures.append(what)

    def ha(self, *argv: str) -> None:
        subprocess.run(["bash", str(HA_SCRIPT), *argv], env=self.env, check=True, stdout=subprocess.DEVNULL)

    def dsn(self, node: str, dbname: str = "lone") -> str:
        return f"host=127.0.0.1 port={self.ports['HA_PG_' + node]} user=postgres dbname={dbname} connect_timeout=3"

    def patroni_pids(self, node: str) -> list[int]:
        out = subprocess.run(["pgrep", "-f", f"patroni {self.dir / node}.yml"], stdout=subprocess.PIPE, text=True)
        return [int(pid) for pid in out.stdout.split()]

    def setup(self) -> None:
        self.ha("up")
        self.ports = ha_nodes.ports(self.dir)
        self.leader = ha_nodes.leader(self.ports)
        if self.leader is None:
            raise OSError("the cluster came up without a leader")
        self.replicas = [n for n in ha_nodes.nodes(self.ports) if n != self.leader]
        with psycopg.connect(self.dsn(self.leader, "postgres"), autocommit=True) as c:
            c.execute("CREATE DATABASE lone")
        subprocess.run([self.args.idemctl, "migrate", "--db.dsn", self.dsn(self.leader)], check=True,
                       stdout=subprocess.DEVNULL)
        if self.args.not_strict:
            subprocess.run(["patronictl", "-c", str(self.dir / "n1.yml"), "edit-config", "--force",
                            "-s", "synchronous_mode_strict=false"], check=True, stdout=subprocess.DEVNULL)
            time.sleep(3)  # a few of the leader's loops (loop_wait 1 s) to read it
        say(f"leader {self.leader}, replicas {', '.join(self.replicas)}"
            + (", synchronous_mode_strict off" if self.args.not_strict else ""))

    def standby_names(self) -> str:
        with psycopg.connect(self.dsn(self.leader), autocommit=True) as c:
            return c.execute("SHOW synchronous_standby_names").fetchone()[0]

    def kill_replicas(self) -> None:
        for node in self.replicas:
            pids = self.patroni_pids(node)
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            self.frozen += pids
            postmaster = int((self.dir / node / "data" / "postmaster.pid").read_text().split()[0])
            for pid in ha_nodes.postmaster_and_children(postmaster):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        # The leader sees its standbys gone, then its Patroni gets a few loops (loop_wait 1 s) to
        # act on it: without strictness it empties synchronous_standby_names.
        deadline = time.monotonic() + 30
        while True:
            with psycopg.connect(self.dsn(self.leader), autocommit=True) as c:
                (streaming,) = c.execute("SELECT count(*) FROM pg_stat_replication").fetchone()
            if streaming == 0:
                break
            if time.monotonic() > deadline:
                raise OSError(f"the leader still has {streaming} standby(s) streaming 30 s after both died")
            time.sleep(0.5)
        time.sleep(4)
        if self.args.not_strict:
            # Without strictness Patroni empties the list within a few loops; on a busy machine
            # that can take longer than the 4 s above, and the claim would then wait for nothing
            # this test is about.
            deadline = time.monotonic() + 30
            while self.standby_names() and time.monotonic() < deadline:
                time.sleep(0.5)
        say(f"both replicas dead; the leader's synchronous_standby_names is {self.standby_names()!r}")

    def resume_replicas(self) -> None:
        for pid in self.frozen:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.frozen = []

    def run(self) -> None:
        self.kill_replicas()
        answer: dict[str, object] = {}

        def claim() -> None:
            try:
                with psycopg.connect(self.dsn(self.leader), autocommit=True) as c:
                    answer["row"] = c.execute(
                        "SELECT outcome, claim_token FROM idem.begin('lone-1', 'payment', 'order-lone-1', "
                        "'pay', NULL, 'initial', '{\"amount_minor\": 100}')").fetchone()
            except psycopg.Error as e:
                answer["error"] = e
            answer["at"] = time.monotonic()

        sent = time.monotonic()
        thread = threading.Thread(target=claim, daemon=True)
        thread.start()
        thread.join(WAIT_ALONE)
        self.check(thread.is_alive(),
                   f"the claim sent to the leader alone is still unacknowledged after {WAIT_ALONE:.0f} s"
                   + ("" if thread.is_alive() else
                      f" (it was answered after {float(answer['at']) - sent:.1f} s: "
                      f"{answer.get('row') or answer.get('error')})"))
        self.resume_replicas()
        thread.join(120)
        self.check(not thread.is_alive() and "row" in answer and answer["row"][0] == "executed",
                   f"once the replicas are back the claim is acknowledged ({answer.get('row') or answer.get('error')})")
        deadline = time.monotonic() + 30
        found = []
        while time.monotonic() < deadline:
            found = []
            for node in self.replicas:
                try:
                    with psycopg.connect(self.dsn(node), autocommit=True) as c:
                        if c.execute("SELECT 1 FROM idem.records WHERE idempotency_key = 'lone-1'").fetchone():
                            found.append(node)
                except psycopg.Error:
                    pass
            if found:
                break
            time.sleep(0.5)
        self.check(bool(found), f"a replica holds the acknowledged claim ({', '.join(found) or 'none'})")

    def close(self) -> None:
        self.resume_replicas()
        if self.failures and not self.args.expect_to_fail:
            kept = self.work / "logs"
            kept.mkdir(exist_ok=True)
            for log in self.dir.glob("*.log"):
                shutil.copy(log, kept)
            say("cluster logs kept in", kept)
        subprocess.run(["bash", str(HA_SCRIPT), "down"], env=self.env, stdout=subprocess.DEVNULL)
        if not self.failures or self.args.expect_to_fail:
            shutil.rmtree(self.work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idemctl", required=True)
    parser.add_argument("--not-strict", action="store_true",
                        help="turn Patroni's synchronous_mode_strict off first")
    parser.add_argument("--expect-to-fail", action="store_true",
                        help="exit 0 when a check fails, 1 when all hold")
    args = parser.parse_args()
    run = Run(args)
    try:
        run.setup()
        run.run()
    except (OSError, subprocess.SubprocessError, psycopg.Error) as e:
        say("could not run:", e)
        run.close()
        return 2
    run.close()
    if run.failures:
        say(f"{len(run.failures)} check(s) failed")
        if args.expect_to_fail:
            say("as expected: without strict synchronous replication the leader acknowledged alone")
            return 0
        return 1
    say("every check held")
    return 1 if args.expect_to_fail else 0


if __name__ == "__main__":
    sys.exit(main())
