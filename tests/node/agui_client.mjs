// Drive a real @ag-ui/client HttpAgent against a live Awaken server and print what it saw as JSON.
//
//   node agui_client.mjs <package> <baseUrl> <scenario> [threadId] [extra JSON]
//
// extra.headers (optional) is passed as HttpAgent's `headers` (e.g. {Authorization: "Bearer …"}) and
// sent with the history GET too.
//
// <package> is an npm alias installed next to this file ("agui-client-0059" = what CopilotKit pins,
// "agui-client-1" = @ag-ui/client 1.x). Every run records the event types the client's pipeline let
// through (after schema checks, chunk expansion and sequence verification), RUN_ERROR codes, the
// result and newMessages; the script ends with agent.messages and agent.state. Anything the client
// logs (warnings, "Agent execution failed") is captured into `logs` instead of being printed, so the
// caller can assert there is none. The script itself never decides pass/fail.

const [pkg, baseUrl, scenario, threadArg, extraArg] = process.argv.slice(2);
const { HttpAgent } = await import(pkg);
const extra = extraArg ? JSON.parse(extraArg) : {};
const headers = extra.headers ?? {};

const logs = [];
for (const level of ["log", "info", "warn", "error", "debug"]) {
  console[level] = (...args) =>
    logs.push(`${level}: ${args.map((a) => (typeof a === "string" ? a : a instanceof Error ? a.message : JSON.stringify(a))).join(" ")}`);
}

const threadId = threadArg || `${scenario}-${Math.random().toString(36).slice(2)}`;
const runs = [];
let counter = 0;
const nextId = (prefix) => `${prefix}-${threadId}-${++counter}`;

function makeAgent(path, init = {}) {
  return new HttpAgent({ url: `${baseUrl}${path}`, threadId, initialState: {}, headers, ...init });
}

async function run(agent, params = {}, onDelta = undefined) {
  const record = { types: [], errors: [], finished: [] };
  try {
    const { result, newMessages } = await agent.runAgent(
      params,
      {
        onEvent: ({ event }) => {
          record.types.push(event.type);
          if (onDelta && event.type === "TEXT_MESSAGE_CONTENT") onDelta();
        },
        onRunErrorEvent: ({ event }) => {
          record.errors.push({ code: event.code, message: event.message });
        },
        onCustomEvent: ({ event }) => {
          (record.custom ??= []).push({ name: event.name, value: event.value });
        },
        onRunFinishedEvent: (p) => {
          record.finished.push({ outcome: p.outcome ?? null, result: p.result ?? null,
                                 pendingToolCallIds: p.pendingToolCallIds ?? null,
                                 interrupts: p.interrupts ?? null });
        },
      },
    );
    record.result = result ?? null;
    record.newMessages = newMessages;
  } catch (err) {
    record.failed = String(err && err.message ? err.message : err);
  }
  runs.push(record);
  return record;
}

function say(agent, content) {
  agent.addMessage({ id: nextId("u"), role: "user", content });
}

function answerTool(agent, toolCallId, content, error) {
  const message = { id: nextId("tool"), role: "tool", toolCallId, content };
  if (error !== undefined) message.error = error;
  agent.addMessage(message);
}

function pendingCalls(agent) {
  // tool calls in agent.messages that have no tool message yet
  const answered = new Set(agent.messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
  return agent.messages
    .filter((m) => m.role === "assistant")
    .flatMap((m) => m.toolCalls ?? [])
    .filter((c) => !answered.has(c.id));
}

// A 1.x client that was handed interrupts must answer every one with resume[] (it refuses to send
// anything else); 0.0.59 knows no interrupts and answers gates with tool messages.
function interrupted(agent) {
  return (agent.pendingInterrupts ?? []).length > 0;
}

function resumeAll(agent, payload, extra = []) {
  const resume = agent.pendingInterrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload }));
  return run(agent, { resume: [...resume, ...extra] });
}

const calc = (expression) => `/call calculator ${JSON.stringify({ expression })}`;

const scenarios = {
  // Three turns on one HttpAgent: it resends the whole history every time; the server dedups it.
  async multiturn() {
    const agent = makeAgent("/v1/ag-ui");
    for (const text of ["hello", "second turn", "third turn"]) {
      say(agent, text);
      await run(agent);
    }
    return agent;
  },
  // Five long turns (14 KB each) on one HttpAgent: from the third on, each request resends a history
  // the server has parsed before (its replay memo splits it off and parses only the new messages).
  async long_history() {
    const agent = makeAgent("/v1/ag-ui");
    for (let turn = 1; turn <= 5; turn++) {
      say(agent, `turn ${turn}: ${"lorem ipsum dolor ".repeat(800)}`);
      await run(agent);
    }
    return agent;
  },
  async reasoning() {
    const agent = makeAgent("/v1/ag-ui");
    say(agent, "/think weighing the options\nwhich one?");
    await run(agent);
    return agent;
  },
  // Two calls in one step (both open while the model streams them), results, answer, then a plain turn.
  async server_tool() {
    const agent = makeAgent("/v1/ag-ui");
    say(agent, `${calc("6 * 7")}\n${calc("2 ** 5")}`);
    await run(agent);
    say(agent, "thanks");
    await run(agent);
    return agent;
  },
  // set_state twice (snapshot, then delta) with a plain turn between: HttpAgent sends its state back.
  async state() {
    const agent = makeAgent("/v1/ag-ui");
    say(agent, `/call set_state ${JSON.stringify({ key: "color", value: "blue" })}`);
    await run(agent);
    say(agent, "what is the state?");
    await run(agent);
    say(agent, `/call set_state ${JSON.stringify({ key: "size", value: { w: 2, h: [1, 2] } })}`);
    await run(agent);
    return agent;
  },
  // guarded: both calls wait at their permission gates; tool messages without error allow them.
  // extra {path, text}: another agent and tool behind the gate (e.g. an MCP tool)
  async approve({ path = "/v1/ag-ui/agents/guarded", text = `${calc("2 ** 10")}\n/call current_time {}` } = {}) {
    const agent = makeAgent(path);
    say(agent, text);
    await run(agent);
    if (interrupted(agent)) {
      await resumeAll(agent, { approved: true });
    } else {
      for (const call of pendingCalls(agent)) answerTool(agent, call.id, "approved");
      await run(agent);
    }
    say(agent, "and now?");
    await run(agent);
    return agent;
  },
  async deny({ path = "/v1/ag-ui/agents/guarded", text = calc("1 + 1") } = {}) {
    const agent = makeAgent(path);
    say(agent, text);
    await run(agent);
    if (interrupted(agent)) {
      await resumeAll(agent, { approved: false, reason: "the user said no" });
    } else {
      for (const call of pendingCalls(agent)) answerTool(agent, call.id, "no", "the user said no");
      await run(agent);
    }
    say(agent, "ok then");
    await run(agent);
    return agent;
  },
  async client_tool() {
    const agent = makeAgent("/v1/ag-ui/agents/frontend");
    say(agent, `/call ask_user ${JSON.stringify({ question: "Your name?" })}`);
    await run(agent);
    for (const call of pendingCalls(agent)) answerTool(agent, call.id, "Ada");
    await run(agent);
    say(agent, "bye");
    await run(agent);
    return agent;
  },
  async mismatch() {
    const agent = makeAgent("/v1/ag-ui/agents/guarded");
    say(agent, calc("3 - 1"));
    await run(agent);
    if (interrupted(agent)) {
      await resumeAll(agent, { approved: true },
                      [{ interruptId: "int_call_not_pending", status: "resolved", payload: { approved: true } }]);
    } else {
      answerTool(agent, "call_not_pending", "approved");
      await run(agent);
    }
    return agent;
  },
  // Threads that branch (docs/branches.md): two turns; then a regenerate (the history up to the last
  // user message again, a new run id, forwardedProps {awaken: {regenerate: true}}); then an edit of the
  // first message (its id with new content, forwardedProps {awaken: {edit: true}}). Each run records
  // the client's messages after it (`after`).
  async branches() {
    const agent = makeAgent("/v1/ag-ui");
    const after = () => { runs.at(-1).after = structuredClone(agent.messages); };
    for (const text of ["first", "second"]) {
      say(agent, text);
      await run(agent);
      after();
    }
    const lastUser = agent.messages.map((m) => m.role).lastIndexOf("user");
    agent.setMessages(agent.messages.slice(0, lastUser + 1));
    await run(agent, { forwardedProps: { awaken: { regenerate: true } } });
    after();
    agent.setMessages([{ ...agent.messages[0], content: "first, edited" }]);
    await run(agent, { forwardedProps: { awaken: { edit: true } } });
    after();
    return agent;
  },
  // First half of a resume across a restart: leave a call waiting at its gate.
  async suspend() {
    const agent = makeAgent("/v1/ag-ui/agents/guarded");
    say(agent, calc("5 + 5"));
    await run(agent);
    return agent;
  },
  // One turn saying extra.text at extra.path (e.g. a server tool that streams progress).
  async say({ path = "/v1/ag-ui", text }) {
    const agent = makeAgent(path);
    say(agent, text);
    await run(agent);
    return agent;
  },
  // New input while a turn streams (extra.path: an agent with on_new_input = "interrupt"): a first
  // HttpAgent's turn is held open by /hold (extra.text); once its first words arrived, a second HttpAgent
  // on the same thread says "next", which stops the first turn and runs. Then a page that reloads the
  // thread rebuilds its agent from the history route: the words the first turn had shown are there.
  async interrupt({ path, text }) {
    const first = makeAgent(path);
    const second = makeAgent(path);
    say(first, text);
    let streaming;
    const delta = new Promise((resolve) => { streaming = resolve; });
    const firstRun = run(first, {}, () => streaming());
    await delta;
    say(second, "next");
    await run(second);
    await firstRun;
    const response = await fetch(`${baseUrl}/v1/ag-ui/threads/${encodeURIComponent(threadId)}/messages`, { headers });
    return makeAgent(path, { initialMessages: (await response.json()).items });
  },
  // Second half, in a fresh process: rebuild the agent from committed history, then answer the call.
  async resume() {
    const response = await fetch(`${baseUrl}/v1/ag-ui/threads/${encodeURIComponent(threadId)}/messages`, { headers });
    const page = await response.json();
    const agent = makeAgent("/v1/ag-ui/agents/guarded", { initialMessages: page.items });
    for (const call of pendingCalls(agent)) answerTool(agent, call.id, "approved");
    await run(agent);
    return agent;
  },
};

const body = scenarios[scenario];
if (!body) {
  process.stdout.write(JSON.stringify({ fatal: `unknown scenario ${scenario}` }));
  process.exit(2);
}
const agent = await body(extra);
process.stdout.write(
  JSON.stringify({ threadId, runs, messages: agent.messages, state: agent.state, logs }),
);
