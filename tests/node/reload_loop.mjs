// Reload mid-answer, again and again, in one Node process: what a page does when it is reloaded while
// an answer streams, against a server whose processes share one address (or a load balancer).
//
//   node reload_loop.mjs agui <package> <baseUrl> <agentId> <count> <prefix>
//     Each round starts a run on its own thread (POST /v1/ag-ui/agents/{agentId}, held open by the
//     scripted model's `/hold`), drops that connection after its first TEXT_MESSAGE_CONTENT (the reload),
//     then rejoins with an @ag-ui/client HttpAgent on GET /v1/ag-ui/threads/{id}/stream (its
//     requestInit overridden; the library's parsing and verification unchanged). Once the rejoined
//     stream has shown text, POST /v1/threads/{id}/stop ends the run.
//   node reload_loop.mjs aisdk <package> <baseUrl> <agentId> <count> <prefix>
//     The same with POST /v1/ai-sdk/agents/{agentId}/chat and DefaultChatTransport.reconnectToStream
//     (what useChat({ resume: true }) calls on a reload), read with readUIMessageStream.
//
// Prints one JSON line: a record per round ({thread, rejoined, text, stop, failed, types}) and whatever
// the library logged. The script never decides pass/fail. Other scripts import `reloadRounds`
// (tests/node/balanced.mjs).

import { pathToFileURL } from "node:url";

/** Start a held run and drop its connection once its first text delta arrived (a reload). */
async function startAndDrop(ctx, thread, round) {
  const { kind, baseUrl, agentId } = ctx;
  const text = `/hold ${thread}\n/words 4`;
  const [url, body, marker] = kind === "agui"
    ? [`${baseUrl}/v1/ag-ui/agents/${agentId}`,
      { threadId: thread, runId: `run-${thread}`, state: {}, messages: [{ id: `u-${thread}`, role: "user", content: text }],
        tools: [], context: [], forwardedProps: {} }, "TEXT_MESSAGE_CONTENT"]
    : [`${baseUrl}/v1/ai-sdk/agents/${agentId}/chat`,
      { id: thread, messages: [{ id: `u-${thread}`, role: "user", parts: [{ type: "text", text }] }] }, "text-delta"];
  const abort = new AbortController();
  const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json" },
                                      body: JSON.stringify(body), signal: abort.signal });
  if (response.status !== 200) throw new Error(`start answered ${response.status}`);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let seen = "";
  while (!seen.includes(marker)) {
    const { value, done } = await reader.read();
    if (done) throw new Error("the run ended before its first delta");
    seen += decoder.decode(value, { stream: true });
  }
  abort.abort();  // the reload
}

async function stop(ctx, thread) {
  const response = await fetch(`${ctx.baseUrl}/v1/threads/${encodeURIComponent(thread)}/stop`, { method: "POST" });
  return { status: response.status, body: response.status === 200 ? await response.json() : null };
}

async function rejoinAgui(ctx, thread, record) {
  class RejoiningAgent extends ctx.lib.HttpAgent {
    requestInit() {
      return { method: "GET", headers: { ...this.headers, Accept: "text/event-stream" }, signal: this.abortController.signal };
    }
  }
  const agent = new RejoiningAgent({ url: `${ctx.baseUrl}/v1/ag-ui/threads/${encodeURIComponent(thread)}/stream`, threadId: thread });
  let stopping = null;
  await agent.runAgent({}, {
    onEvent: ({ event }) => {
      record.types.push(event.type);
      if (event.type === "TEXT_MESSAGE_CONTENT") {
        record.rejoined = true;
        record.text += event.delta;
        stopping ??= stop(ctx, thread);
      }
    },
  });
  record.stop = stopping ? await stopping : null;
}

async function rejoinAisdk(ctx, thread, record) {
  const transport = new ctx.lib.DefaultChatTransport({ api: `${ctx.baseUrl}/v1/ai-sdk/agents/${ctx.agentId}/chat` });
  const stream = await transport.reconnectToStream({ chatId: thread });
  if (stream === null) return;  // 204: refused as "nothing runs"
  let stopping = null;
  const reader = stream.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    record.types.push(value.type);
    if (value.type === "text-delta") {
      record.rejoined = true;
      record.text += value.delta;
      stopping ??= stop(ctx, thread);
    }
  }
  record.stop = stopping ? await stopping : null;
}

/** `count` rounds (start, reload, rejoin, stop) on threads `${prefix}-${i}`; a record per round. A round
 *  that does not end within 15 s is recorded as failed (its requests abandoned). */
export async function reloadRounds({ kind, lib, baseUrl, agentId, count, prefix }) {
  const ctx = { kind, lib, baseUrl, agentId };
  const rounds = [];
  for (let i = 0; i < Number(count); i++) {
    const thread = `${prefix}-${i}`;
    const record = { thread, rejoined: false, text: "", stop: null, types: [] };
    try {
      let timer;
      const hung = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`no end within 15 s (${record.phase})`)), 15000); });
      await Promise.race([hung, (async () => {
        record.phase = "start";
        await startAndDrop(ctx, thread, i);
        record.phase = "rejoin";
        await (kind === "agui" ? rejoinAgui : rejoinAisdk)(ctx, thread, record);
      })()]).finally(() => clearTimeout(timer));
    } catch (err) {
      record.failed = String(err && err.message ? err.message : err);
    }
    rounds.push(record);
  }
  return rounds;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [kind, pkg, baseUrl, agentId, count, prefix] = process.argv.slice(2);
  const logs = [];
  for (const level of ["log", "info", "warn", "error", "debug"]) {
    console[level] = (...args) => logs.push(`${level}: ${args.map((a) => (a instanceof Error ? a.message : String(a))).join(" ")}`);
  }
  const lib = await import(pkg);
  const rounds = await reloadRounds({ kind, lib, baseUrl, agentId, count, prefix });
  process.stdout.write(JSON.stringify({ rounds, logs }) + "\n");
  process.exit(0);  // a hung round's requests are abandoned
}
