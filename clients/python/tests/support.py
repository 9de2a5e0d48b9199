"""What the client tests share: the database they run against, read-backs as the superuser, and a
stand-in payment gateway that keeps its own ledger (the truth a double charge would show in).

clients/run_tests.sh creates a migrated database and a login role that holds only idem_writer,
and passes both DSNs: the guard runs with protocol rights only, as an agent runtime would.
"""

from __future__ import annotations

import itertools
import os
import threading
import uuid
from typing import Any, Callable, Optional

import psycopg

from idemwatch import CallContext, ToolCall, TriggerSource, stable_key


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run these tests through clients/run_tests.sh (ctest -R clients_)")
    return value


WRITER_DSN = _env("IDEMWATCH_CLIENT_DSN")
POOLED_DSN = _env("IDEMWATCH_CLIENT_POOLED_DSN")  # the writer through PgBouncer, transaction mode
LEDGER_DSN = _env("IDEMWATCH_CLIENT_LEDGER_DSN")  # the gateway's side: idem_ledger only
ADMIN_DSN = _env("IDEMWATCH_CLIENT_ADMIN_DSN")


def admin() -> psycopg.Connection:
    return psycopg.connect(ADMIN_DSN, autocommit=True)


def scalar(sql: str, *params):
    with admin() as conn:
        row = conn.execute(sql, params).fetchone()
        return None if row is None else row[0]


def rows(sql: str, *params) -> list:
    with admin() as conn:
        return conn.execute(sql, params).fetchall()


def unique(prefix: str) -> str:
    """A business id no other test (or earlier run) uses: tests share one database."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def payment(
    order_id: str,
    source=TriggerSource.INITIAL,
    trace_id: Optional[str] = None,
    agent_id: Optional[str] = None,
    amount: int = 2990,
    attempt: int = 1,
) -> ToolCall:
    """The tests' tool call: pay `amount` for an order, keyed by the order (and the attempt)."""
    return ToolCall(
        key=stable_key("payment", order_id, "pay", attempt),
        biz_type="payment",
        biz_id=order_id,
        tool="pay",
        payload={"order_id": order_id, "amount_minor": amount, "currency": "CNY"},
        context=CallContext(TriggerSource(source), trace_id, agent_id),
    )


def status_of(key: str):
    return scalar("SELECT status FROM idem.records WHERE idempotency_key = %s", key)


class counted:
    """A tool body that counts how often it ran (`runs`): what the never-run-again tests check.

        @counted
        def body(): ...
    """

    def __init__(self, fn: Callable[[], Any]):
        self.fn = fn
        self.runs = 0

    def __call__(self) -> Any:
        self.runs += 1
        return self.fn()


def in_threads(target: Callable[[int], None], count: int) -> None:
    """Runs target(0) .. target(count - 1), each on its own thread, and waits for all of them."""
    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


class Gateway:
    """A payment gateway that charges every request it receives: it has no idempotency of its own,
    like the downstream in the seeds' incident. `charges[order]` lists every charge it made."""

    def __init__(self):
        self._lock = threading.Lock()
        self._refs = itertools.count(1)
        self._prefix = uuid.uuid4().hex[:8]  # gateway refs are unique across the database's flows
        self.charges: dict[str, list[str]] = {}

    def charge(self, order_id: str, amount_minor: int) -> dict:
        with self._lock:
            ref = f"gw-{self._prefix}-{next(self._refs)}"
            self.charges.setdefault(order_id, []).append(ref)
        return {"gateway_ref": ref, "amount_minor": amount_minor}

    def count(self, order_id: str) -> int:
        with self._lock:
            return len(self.charges.get(order_id, []))
