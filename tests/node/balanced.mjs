// The real clients through a load balancer in front of several server processes (round robin, no
// stickiness): every request may reach another process. One Node process, several steps:
//
//   node balanced.mjs <baseUrl> <prefix> <reloads>
//
//   stream       an @ag-ui/client 1.x HttpAgent's turn on /v1/ag-ui/agents/assistant, then a second one
//   reloads      `reloads` rounds each of tests/node/reload_loop.mjs with HttpAgent (agent `detached`,
//                the AG-UI thread stream) and with ai 7's reconnectToStream (useChat({ resume: true })):
//                start a held run, drop it after its first delta, rejoin, stop at the rejoined text
//   approve      HttpAgent on agent `guarded`: the call waits at its gate (an interrupt), the app
//                resumes it approved, and a next turn
//   client_tool  HttpAgent on agent `frontend`: the model calls ask_user, the app answers it, a next turn
//
// Then every thread's history (GET /v1/ag-ui/threads/{id}/messages, each through the balancer too).
// Prints one JSON line; anything the libraries log is captured into `logs`. It never decides pass/fail.

import { reloadRounds } from "./reload_loop.mjs";

const [baseUrl, prefix, reloads] = process.argv.slice(2);
const logs = [];
for (const level of ["log", "info", "warn", "error", "debug"]) {
  console[level] = (...args) => logs.push(`${level}: ${args.map((a) => (a instanceof Error ? a.message : String(a))).join(" ")}`);
}
const agui = await import("agui-client-1");
const ai = await import("ai-7");

/** One HttpAgent conversation on `path`: each turn's event types, errors and RUN_FINISHED outcome. */
function conversation(path, threadId) {
  const agent = new agui.HttpAgent({ url: `${baseUrl}${path}`, threadId, initialState: {} });
  const runs = [];
  let n = 0;
  return {
    agent,
    runs,
    say(content) { agent.addMessage({ id: `u-${threadId}-${++n}`, role: "user", content }); },
    answer(toolCallId, content) { agent.addMessage({ id: `tool-${threadId}-${++n}`, role: "tool", toolCallId, content }); },
    async run(params = {}) {
      const record = { types: [], errors: [], outcome: null };
      try {
        await agent.runAgent(params, {
          onEvent: ({ event }) => { record.types.push(event.type); },
          onRunErrorEvent: ({ event }) => { record.errors.push({ code: event.code, message: event.message }); },
          onRunFinishedEvent: (p) => { record.outcome = p.outcome ?? null; },
        });
      } catch (err) {
        record.failed = String(err && err.message ? err.message : err);
      }
      runs.push(record);
      return record;
    },
  };
}

const out = { steps: {}, histories: {} };

{  // stream
  const c = conversation("/v1/ag-ui/agents/assistant", `${prefix}-stream`);
  c.say("hello through the balancer");
  await c.run();
  c.say("/words 12");
  await c.run();
  out.steps.stream = { thread: `${prefix}-stream`, runs: c.runs, messages: c.agent.messages };
}

out.steps.reloads = {
  agui: await reloadRounds({ kind: "agui", lib: agui, baseUrl, agentId: "detached", count: reloads, prefix: `${prefix}-ra` }),
  aisdk: await reloadRounds({ kind: "aisdk", lib: ai, baseUrl, agentId: "detached", count: reloads, prefix: `${prefix}-rs` }),
};

{  // approve a gate: the waiting run's resume goes wherever the balancer sends it
  const c = conversation("/v1/ag-ui/agents/guarded", `${prefix}-approve`);
  c.say('/call calculator {"expression":"6 * 7"}');
  await c.run();
  const interrupts = c.agent.pendingInterrupts ?? [];
  await c.run({ resume: interrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: { approved: true } })) });
  c.say("and now?");
  await c.run();
  out.steps.approve = { thread: `${prefix}-approve`, interrupts: interrupts.length, runs: c.runs, messages: c.agent.messages };
}

{  // answer a client tool
  const c = conversation("/v1/ag-ui/agents/frontend", `${prefix}-tool`);
  c.say('/call ask_user {"question":"Your name?"}');
  await c.run();
  const answered = new Set(c.agent.messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
  for (const call of c.agent.messages.flatMap((m) => (m.role === "assistant" ? m.toolCalls ?? [] : []))) {
    if (!answered.has(call.id)) c.answer(call.id, "Ada");
  }
  await c.run();
  c.say("bye");
  await c.run();
  out.steps.client_tool = { thread: `${prefix}-tool`, runs: c.runs, messages: c.agent.messages };
}

const threads = [out.steps.stream.thread, out.steps.approve.thread, out.steps.client_tool.thread,
                 ...out.steps.reloads.agui.map((r) => r.thread), ...out.steps.reloads.aisdk.map((r) => r.thread)];
for (const thread of threads) {
  const response = await fetch(`${baseUrl}/v1/ag-ui/threads/${encodeURIComponent(thread)}/messages?limit=200`);
  out.histories[thread] = response.status === 200 ? (await response.json()).items : { status: response.status };
}
process.stdout.write(JSON.stringify({ ...out, logs }) + "\n");
process.exit(0);
