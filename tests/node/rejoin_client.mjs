// Rejoin a thread's active run with a real client library and print what it parsed as JSON.
//
//   node rejoin_client.mjs agui <package> <baseUrl> <threadId>
//     An @ag-ui/client HttpAgent whose request is the rejoin GET /v1/ag-ui/threads/{id}/stream (its
//     requestInit overridden: the library's own SSE parsing, schema checks and event verification
//     run unchanged). Prints the event types, RUN_ERRORs, a failure if any, and agent.messages.
//   node rejoin_client.mjs aisdk <package> <baseUrl> <chatId> [agentId]
//     DefaultChatTransport.reconnectToStream (what useChat({ resume: true }) calls), its chunks read
//     with readUIMessageStream. Prints the chunk types and the final assistant message, or null for 204.
//
// Anything the library logs is captured into `logs`. The script never decides pass/fail.

const [kind, pkg, baseUrl, threadId, agentId] = process.argv.slice(2);
const logs = [];
for (const level of ["log", "info", "warn", "error", "debug"]) {
  console[level] = (...args) => logs.push(`${level}: ${args.map((a) => (a instanceof Error ? a.message : String(a))).join(" ")}`);
}

async function agui() {
  const { HttpAgent } = await import(pkg);
  class RejoiningAgent extends HttpAgent {
    requestInit() {
      return { method: "GET", headers: { ...this.headers, Accept: "text/event-stream" }, signal: this.abortController.signal };
    }
  }
  const agent = new RejoiningAgent({ url: `${baseUrl}/v1/ag-ui/threads/${encodeURIComponent(threadId)}/stream`, threadId });
  const out = { types: [], errors: [] };
  try {
    await agent.runAgent({}, {
      onEvent: ({ event }) => { out.types.push(event.type); },
      onRunErrorEvent: ({ event }) => { out.errors.push({ code: event.code, message: event.message }); },
    });
  } catch (err) {
    out.failed = String(err && err.message ? err.message : err);
  }
  out.messages = agent.messages;
  return out;
}

async function aisdk() {
  const { DefaultChatTransport, readUIMessageStream } = await import(pkg);
  const api = agentId ? `${baseUrl}/v1/ai-sdk/agents/${encodeURIComponent(agentId)}/chat` : `${baseUrl}/v1/ai-sdk/chat`;
  const transport = new DefaultChatTransport({ api });
  const out = { chunks: [], message: null };
  try {
    const stream = await transport.reconnectToStream({ chatId: threadId });
    if (stream === null) return { ...out, stream: null };
    const [forChunks, forMessage] = stream.tee();
    const reading = (async () => { for await (const chunk of forChunks) out.chunks.push(chunk.type); })();
    for await (const message of readUIMessageStream({ stream: forMessage })) out.message = message;
    await reading;
  } catch (err) {
    out.failed = String(err && err.message ? err.message : err);
  }
  return out;
}

const out = kind === "agui" ? await agui() : await aisdk();
process.stdout.write(JSON.stringify({ ...out, logs }) + "\n");
