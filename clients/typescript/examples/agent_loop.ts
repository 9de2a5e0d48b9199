// A payment tool under idemwatch, inside a tool-calling agent loop; runs with no network.
//
// The loop is a stand-in, in this file, of what the Vercel AI SDK's `tool({ description, execute })`
// + `generateText({ model, tools, maxSteps })` (or the OpenAI Agents SDK's `tool()` + `run()`) do: the
// model asks for a tool call, the framework executes it, retries it when it throws, and hands the
// result or the error text back to the model, which may well ask for the same call again. The model
// is scripted. The gateway drops the first response after charging: the seeds' incident. Every
// layer retries (framework, model, the gateway's webhook) and the customer is charged once.
//
//   npm run example   (IDEMWATCH_CLIENT_HOST/PORT/DATABASE/USER, or PGHOST... for node-postgres)
//
// Wiring a real framework is the same three steps: wrap the tool's execute with guard.tool(...),
// state the trigger source around each execution (withCallContext), and let a DoNotRetry error's
// message (`forModel()`) reach the model as the tool's result.
import { Pool } from "pg";

import { GuardedTool, Guard, Protocol, ResponseTimeout, TriggerSource, withCallContext } from "../src";

// --- a stand-in for an agent framework's tool-calling loop ------------------------------------------

interface ToolCallPart {
  toolCallId: string;
  toolName: string;
  args: Record<string, unknown>;
}
type Step = { text: string } | { toolCall: ToolCallPart };
type Message = { role: "user" | "assistant" | "tool"; content: unknown };

interface FrameworkTool {
  description: string;
  execute: (args: any, meta: { toolCallId: string; retry: number }) => Promise<unknown>;
}

/** The shape of generateText: run the tools the model asks for, retrying a throw up to maxRetries. */
async function generateText(options: {
  model: { next(messages: Message[]): Step };
  tools: Record<string, FrameworkTool>;
  prompt: string;
  maxSteps: number;
  maxRetries: number;
}): Promise<{ text: string; messages: Message[] }> {
  const messages: Message[] = [{ role: "user", content: options.prompt }];
  for (let step = 0; step < options.maxSteps; step++) {
    const next = options.model.next(messages);
    if ("text" in next) {
      messages.push({ role: "assistant", content: next.text });
      return { text: next.text, messages };
    }
    const { toolCallId, toolName, args } = next.toolCall;
    messages.push({ role: "assistant", content: next.toolCall });
    let result: unknown;
    for (let retry = 0; retry <= options.maxRetries; retry++) {
      try {
        result = await options.tools[toolName].execute(args, { toolCallId, retry });
        break;
      } catch (err) {
        result = `error: ${(err as Error).message}`; // a naive framework retries whatever was thrown
      }
    }
    messages.push({ role: "tool", content: result });
  }
  return { text: "(max steps)", messages };
}

/** Asks to pay; after an error asks again (the LLM's own retry); then reports. */
class ScriptedModel {
  private ids = 1;
  constructor(private readonly orderId: string) {}

  next(messages: Message[]): Step {
    const results = messages.filter((m) => m.role === "tool").map((m) => String(m.content));
    if (results.length === 0 || (results[results.length - 1].startsWith("error") && results.length < 2)) {
      return { toolCall: { toolCallId: `call_${this.ids++}`, toolName: "pay", args: { orderId: this.orderId, amountMinor: 2990 } } };
    }
    return { text: `Payment status: ${results[results.length - 1]}` };
  }
}

// --- the idemwatch part: what an integrator writes --------------------------------------------------

/** Charges every request; the first response is lost on the way back (a proxy timeout). */
class FlakyGateway {
  readonly charges: Array<{ orderId: string; amountMinor: number; gatewayRef: string }> = [];

  async charge(orderId: string, amountMinor: number) {
    const gatewayRef = `gw-${orderId}-${this.charges.length + 1}`;
    this.charges.push({ orderId, amountMinor, gatewayRef });
    if (this.charges.length === 1) throw new ResponseTimeout("no response from the gateway within 5s");
    return { gatewayRef, status: "paid" };
  }
}

type PayArgs = { orderId: string; amountMinor: number };

/**
 * States the trigger source the loop knows: its own retry is `framework`; the model asking again for
 * a call it already made (a new tool call id, the same intent, so the same key) is `llm`.
 */
function asFrameworkTool(tool: GuardedTool<PayArgs, unknown>, description: string, trace: { traceId: string; agentId: string }): FrameworkTool {
  const seen = new Set<string>();
  return {
    description,
    execute: async (args: PayArgs, meta) => {
      const key = tool.callFor(args).key;
      const triggerSource: TriggerSource = meta.retry > 0 ? "framework" : seen.has(key) ? "llm" : "initial";
      seen.add(key);
      return withCallContext({ triggerSource, ...trace }, () => tool(args));
    },
  };
}

/**
 * `writer`: the agent's login (idem_writer). `reconciler` (idem_reconciler) and `gateway` (the
 * gateway's webhook, idem_ledger; default: `reconciler`) add the webhook and the reconciliation
 * after the lost response.
 */
export async function main(options: {
  writer: Pool;
  reconciler?: Pool;
  gateway?: Pool;
  orderId?: string;
  log?: (...a: unknown[]) => void;
}) {
  const orderId = options.orderId ?? "order-42";
  const log = options.log ?? console.log;
  const guard = new Guard(options.writer);
  const gateway = new FlakyGateway();
  const pay = guard.tool({ bizType: "payment", bizId: "orderId", tool: "pay" }, (args: PayArgs) =>
    gateway.charge(args.orderId, args.amountMinor),
  );
  const trace = { traceId: `trace-${orderId}`, agentId: "coffee-agent" };

  const first = await generateText({
    model: new ScriptedModel(orderId),
    tools: { pay: asFrameworkTool(pay, "Charge the customer for an order (amount in minor units).", trace) },
    prompt: "Buy me a coffee",
    maxSteps: 5,
    maxRetries: 1,
  });
  log("agent:", first.text);

  let replayed: unknown = null;
  if (options.reconciler) {
    // The gateway's webhook reports the charge it made; the reconciler settles the UNKNOWN record
    // from that evidence; the webhook's re-drive of the tool call is then replayed.
    const key = pay.callFor({ orderId, amountMinor: 2990 }).key;
    await new Protocol(options.gateway ?? options.reconciler).recordFundFlow({
      bizType: "payment", bizId: orderId, kind: "DEBIT", amountMinor: 2990, currency: "CNY",
      externalRef: gateway.charges[0].gatewayRef, idempotencyKey: key,
    });
    await options.reconciler.query("SELECT idem.reconcile()");
    replayed = await withCallContext({ triggerSource: "callback", ...trace }, () => pay({ orderId, amountMinor: 2990 }));
    log("after reconciliation, the callback's re-drive is replayed:", replayed);
  }
  log("charges at the gateway:", gateway.charges.length);
  return { text: first.text, messages: first.messages, charges: gateway.charges.length, replayed };
}

if (require.main === module) {
  const env = process.env;
  const writer = new Pool({
    host: env.IDEMWATCH_CLIENT_HOST, port: env.IDEMWATCH_CLIENT_PORT ? Number(env.IDEMWATCH_CLIENT_PORT) : undefined,
    database: env.IDEMWATCH_CLIENT_DATABASE, user: env.IDEMWATCH_CLIENT_USER,
  });
  main({ writer })
    .then((outcome) => {
      process.exitCode = outcome.charges === 1 ? 0 : 1;
    })
    .catch((err) => {
      console.error(err);
      process.exitCode = 1;
    })
    .finally(() => writer.end());
}
