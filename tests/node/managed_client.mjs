// The official @anthropic-ai/sdk against Awaken's Managed Agents wire (client.beta.sessions), pointed at it by
// baseURL; prints what it saw as JSON. The script never decides pass/fail.
//
//   node managed_client.mjs <baseUrl>
//     quickstart: create a session (agent "assistant"), send, stream with event_deltas until idle, list
//     gate:       agent "guarded": open the stream, send a calculator call, allow it at requires_action
//     runner:     agent "frontend": the SDK's session tool runner answers its client tool ask_user
//     reconnect:  a second stream with Last-Event-ID after the quickstart's user.message

import Anthropic from "@anthropic-ai/sdk";
import { betaTool } from "@anthropic-ai/sdk/helpers/beta/json-schema";

const [baseUrl] = process.argv.slice(2);
const client = new Anthropic({ baseURL: baseUrl, apiKey: "unused", maxRetries: 0 });
const text = (t) => [{ type: "user.message", content: [{ type: "text", text: t }] }];
// each step goes to stderr as it starts, so a run that never ends says where it waits
const step = (name) => process.stderr.write(`step: ${name}\n`);
const pick = (events) => events.map((e) => [e.id ?? e.event?.id ?? e.event_id, e.type]);

async function untilIdle(iterator, out, { onAction } = {}) {
  for (;;) {
    const { value, done } = await iterator.next();
    if (done) throw new Error(`the stream ended early: ${out.map((e) => e.type)}`);
    step(`  event ${value.type}${value.stop_reason ? ` (${value.stop_reason.type})` : ""}`);
    out.push(value);
    if (value.type === "session.status_idle") {
      if (value.stop_reason.type !== "requires_action") return value;
      if (onAction) await onAction(value);
    }
  }
}

async function quickstart() {
  step("quickstart: create, send, stream");
  const session = await client.beta.sessions.create({ agent: "assistant", environment_id: "env_node", title: "Node" });
  const sent = await client.beta.sessions.events.send(session.id, { events: text("/words 4") });
  const stream = await client.beta.sessions.events.stream(session.id, { event_deltas: ["agent.message"] });
  const events = [];
  await untilIdle(stream[Symbol.asyncIterator](), events);
  stream.controller.abort();
  const history = [];
  step("quickstart: list, reconnect");
  for await (const event of client.beta.sessions.events.list(session.id, { limit: 2 })) history.push(event);
  const reconnect = await client.beta.sessions.events.stream(session.id, {}, { headers: { "Last-Event-ID": sent.data[0].id } });
  const resumed = [];
  await untilIdle(reconnect[Symbol.asyncIterator](), resumed);
  reconnect.controller.abort();
  const listed = await client.beta.sessions.list();
  return { session: { id: session.id, status: session.status, title: session.title, environment_id: session.environment_id },
           receipt: pick(sent.data), streamed: pick(events), history: pick(history), resumed: pick(resumed),
           text: events.find((e) => e.type === "agent.message")?.content[0].text, sessions: listed.data.map((s) => s.id) };
}

async function gate() {
  step("gate: create, stream, send");
  const session = await client.beta.sessions.create({ agent: "guarded", environment_id: "env_node" });
  const stream = await client.beta.sessions.events.stream(session.id);
  const events = [];
  await client.beta.sessions.events.send(session.id, { events: text('/call calculator {"expression": "6*7"}') });
  await untilIdle(stream[Symbol.asyncIterator](), events, {
    onAction: async (idle) => {
      await client.beta.sessions.events.send(session.id, { events: idle.stop_reason.event_ids.map((id) => (
        { type: "user.tool_confirmation", tool_use_id: id, result: "allow" })) });
    },
  });
  stream.controller.abort();
  const use = events.find((e) => e.type === "agent.tool_use");
  const result = events.find((e) => e.type === "agent.tool_result");
  return { streamed: pick(events), permission: use.evaluated_permission, result: result.content[0].text };
}

async function runner() {
  step("runner: create, tool runner");
  const session = await client.beta.sessions.create({ agent: "frontend", environment_id: "env_node" });
  const asked = [];
  const askUser = betaTool({
    name: "ask_user", description: "Ask the user a question and return their answer.",
    inputSchema: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
    run: async ({ question }) => { asked.push(question); return "Grace"; },
  });
  // the end of the turn is awaited on a stream opened before anything is sent: one opened after the tool
  // runner posts its answer may open once the turn's idle went out (to the runner's own stream), and then
  // starts at the end, waiting for a turn that never comes
  const stream = await client.beta.sessions.events.stream(session.id);
  const tools = client.beta.sessions.events.toolRunner(session.id, { tools: [askUser] });
  const calls = [];
  const sending = client.beta.sessions.events.send(session.id, { events: text('/call ask_user {"question": "Name?"}') });
  for await (const call of tools) {
    calls.push({ name: call.name, posted: call.posted, isError: call.isError });
    break;
  }
  await sending;
  step("runner: stream until idle");
  const tail = [];
  await untilIdle(stream[Symbol.asyncIterator](), tail);
  stream.controller.abort();
  step("runner: history");
  const history = [];
  for await (const event of client.beta.sessions.events.list(session.id)) history.push(event);
  return { asked, calls, history: history.map((e) => e.type), answer: history.find((e) => e.type === "agent.message")?.content[0].text };
}

const out = {};
try {
  out.quickstart = await quickstart();
  out.gate = await gate();
  out.runner = await runner();
} catch (error) {
  out.failure = String(error?.stack ?? error);
}
step("done");
// written, then exit: a stream the SDK's tool runner still holds would keep the process alive
process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(0));
