"""A payment tool under idemwatch, inside a tool-calling agent loop; runs with no network.

The loop below is a stand-in, in this file, of what LangChain's `@tool` + AgentExecutor (or the
OpenAI Agents SDK's `function_tool` + Runner) do: the model asks for a tool call, the framework runs
it, retries it when it raises, and hands the result or the error back to the model, which may well
ask for the same call again. The model is scripted. The gateway drops the first response after
charging: the incident of the seeds. Every layer retries (framework, model, the gateway's webhook)
and the customer is charged once.

    PYTHONPATH=clients/python python3 clients/python/examples/agent_loop.py "host=... dbname=..." ["reconciler DSN"]

Wiring a real framework is the same three lines: wrap the tool function with `guard.tool(...)`,
state the trigger source around each invocation (`call_context`), and return `for_model()` of a
DoNotRetry error to the model as the tool's result.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
from typing import Any, Callable

import psycopg

import idemwatch
from idemwatch import Guard, ResponseTimeout, TriggerSource, call_context


# --- a stand-in for an agent framework's tool-calling loop --------------------------------------------


@dataclasses.dataclass
class ToolCallRequest:
    call_id: str
    name: str
    args: dict


class MiniAgentExecutor:
    """The shape of a framework's executor: run tools the model asks for, retry on exceptions
    (`max_retries`, as frameworks do by default), give the model the result or the error text."""

    def __init__(self, model, tools: dict[str, Callable[..., Any]], max_retries: int = 1):
        self.model, self.tools, self.max_retries = model, tools, max_retries
        self.transcript: list[tuple[str, Any]] = []

    def run(self, user_message: str, invoke: Callable) -> str:
        self.transcript.append(("user", user_message))
        while True:
            step = self.model.next(self.transcript)
            if isinstance(step, str):
                self.transcript.append(("assistant", step))
                return step
            self.transcript.append(("tool_call", step))
            for retry in range(self.max_retries + 1):
                try:
                    result = invoke(self.tools[step.name], step, retry)
                    break
                except Exception as exc:  # a naive framework retries whatever was raised
                    result = f"error: {exc}"  # a DoNotRetry's text says so to the model
            self.transcript.append(("tool_result", result))


class ScriptedModel:
    """Asks to pay; after an error asks again (the LLM's own retry); then reports."""

    def __init__(self, order_id: str):
        self.order_id = order_id
        self.ids = itertools.count(1)

    def next(self, transcript) -> Any:
        results = [content for role, content in transcript if role == "tool_result"]
        if not results or (str(results[-1]).startswith("error") and len(results) < 2):
            return ToolCallRequest(f"call_{next(self.ids)}", "pay", {"order_id": self.order_id, "amount_minor": 2990})
        last = results[-1]
        return f"Payment status: {last}"


# --- the idemwatch part: what an integrator writes ---------------------------------------------------


class FlakyGateway:
    """Charges every request; the first response is lost on the way back (a proxy timeout)."""

    def __init__(self):
        self.charges: list[dict] = []

    def charge(self, order_id: str, amount_minor: int) -> dict:
        ref = f"gw-{order_id}-{len(self.charges) + 1}"
        self.charges.append({"order_id": order_id, "amount_minor": amount_minor, "gateway_ref": ref})
        if len(self.charges) == 1:
            raise ResponseTimeout("no response from the gateway within 5s")
        return {"gateway_ref": ref, "status": "paid"}


def make_pay_tool(guard: Guard, gateway: FlakyGateway):
    @guard.tool(biz_type="payment", biz_id="order_id", tool="pay")
    def pay(order_id: str, amount_minor: int) -> dict:
        """Charge the customer for an order (amount in minor units)."""
        return gateway.charge(order_id, amount_minor)

    return pay


class SourceTracker:
    """States the trigger source the loop knows: its own retry is `framework`; the model asking
    again for a call it already made (a new call id, the same intent) is `llm`."""

    def __init__(self, trace_id: str, agent_id: str):
        self.trace_id, self.agent_id = trace_id, agent_id
        self.seen: set[str] = set()

    def invoke(self, tool: idemwatch.GuardedTool, request: ToolCallRequest, retry: int) -> Any:
        key = tool.call_for((), request.args).key
        if retry > 0:
            source = TriggerSource.FRAMEWORK
        elif key in self.seen:
            source = TriggerSource.LLM
        else:
            source = TriggerSource.INITIAL
        self.seen.add(key)
        with call_context(source, trace_id=self.trace_id, agent_id=self.agent_id):
            return tool(**request.args)


def main(dsn: str, reconciler_dsn: str | None = None, order_id: str = "order-42", gateway_dsn: str | None = None) -> dict:
    """`dsn`: the agent's login (idem_writer). `reconciler_dsn` (idem_reconciler) and `gateway_dsn`
    (the gateway's webhook, idem_ledger; default: `reconciler_dsn`) add the webhook and the
    reconciliation after the lost response."""
    guard = Guard(dsn)
    gateway = FlakyGateway()
    pay = make_pay_tool(guard, gateway)
    tracker = SourceTracker(trace_id=f"trace-{order_id}", agent_id="coffee-agent")

    agent = MiniAgentExecutor(ScriptedModel(order_id), {"pay": pay}, max_retries=1)
    first = agent.run("Buy me a coffee", tracker.invoke)
    print("agent:", first)

    answer = None
    if reconciler_dsn:
        # The gateway's webhook reports the charge it made; the reconciler settles the UNKNOWN
        # record from that evidence; the webhook's re-drive of the tool call is then replayed.
        key = pay.call_for((), {"order_id": order_id, "amount_minor": 2990}).key
        with psycopg.connect(gateway_dsn or reconciler_dsn, autocommit=True) as conn:
            idemwatch.Protocol(conn).record_fund_flow(
                "payment", order_id, "DEBIT", 2990, "CNY", gateway.charges[0]["gateway_ref"], key
            )
        with psycopg.connect(reconciler_dsn, autocommit=True) as conn:
            conn.execute("SELECT idem.reconcile()")
        with call_context(TriggerSource.CALLBACK, trace_id=f"trace-{order_id}", agent_id="coffee-agent"):
            answer = pay(order_id=order_id, amount_minor=2990)
        print("after reconciliation, the callback's re-drive is replayed:", answer)

    guard.close()
    print("charges at the gateway:", len(gateway.charges))
    return {"agent": first, "charges": len(gateway.charges), "replayed": answer, "transcript": agent.transcript}


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: agent_loop.py DSN [RECONCILER_DSN [GATEWAY_DSN]]")
    outcome = main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None,
                   gateway_dsn=sys.argv[3] if len(sys.argv) > 3 else None)
    sys.exit(0 if outcome["charges"] == 1 else 1)
