// Drives Awaken's WebSocket routes with the `ws` package (permessage-deflate on, as browsers do).
//
//   node ws_client.mjs agui  ws://127.0.0.1:PORT
//   node ws_client.mjs aisdk ws://127.0.0.1:PORT
//
// Prints one JSON object on stdout: the messages each step received, grouped per socket, and the
// close code each socket ended with. The Python tests (tests/test_ws_*.py) assert on it.
import WebSocket from "ws";

const [mode, base] = process.argv.slice(2);

/** A socket with a message queue: `next()` resolves with the next text message (JSON-decoded unless [DONE]). */
function open(url) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const queue = [];
    const waiters = [];
    let closeCode = null;
    ws.on("message", (data, isBinary) => {
      const text = data.toString();
      const message = isBinary ? { binary: text } : text === "[DONE]" ? text : JSON.parse(text);
      const waiter = waiters.shift();
      if (waiter) waiter(message);
      else queue.push(message);
    });
    ws.on("error", reject);
    ws.on("open", () =>
      resolve({
        ws,
        next: () =>
          queue.length
            ? Promise.resolve(queue.shift())
            : new Promise((res, rej) => {
                const timer = setTimeout(() => rej(new Error(`no message from ${url} within 10 s`)), 10000);
                waiters.push((m) => (clearTimeout(timer), res(m)));
              }),
        send: (body) => ws.send(typeof body === "string" ? body : JSON.stringify(body)),
        close: () =>
          new Promise((res) => {
            ws.on("close", (code) => ((closeCode = code), res(closeCode)));
            ws.close(1000);
          }),
      }),
    );
  });
}

const isAguiTerminal = (m) => m.type === "RUN_FINISHED" || m.type === "RUN_ERROR";
const isDone = (m) => m === "[DONE]";

async function until(sock, done) {
  const out = [];
  for (;;) {
    const m = await sock.next();
    out.push(m);
    if (done(m)) return out;
  }
}

const user = (id, content) => ({ id, role: "user", content });
const agui = (threadId, runId, messages, extra = {}) => ({
  threadId, runId, state: {}, messages, tools: [], context: [], forwardedProps: {}, ...extra,
});

async function aguiMode() {
  const closes = {};
  const out = {};

  // default agent: a text run, a busy request mid-run, bad frames, and a run after them
  const d = await open(`${base}/v1/ag-ui/ws`);
  const text = (d.send(agui("n-t", "n-r1", [user("n-u1", "hi from node")])), await until(d, isAguiTerminal));
  d.send(agui("n-t", "n-r2", [user("n-u2", "/delay 15\n/words 12")]));
  const busy = [];
  for (;;) {
    const m = await d.next();
    busy.push(m);
    if (m.type === "TEXT_MESSAGE_CONTENT") break;
  }
  d.send(agui("n-other", "n-r3", [user("n-u3", "too soon")]));
  busy.push(...(await until(d, (m) => m.type === "RUN_FINISHED")));
  const bad = [];
  d.send("{not json");
  bad.push(await d.next());
  d.ws.send(Buffer.from([0, 1, 2]), { binary: true });
  bad.push(await d.next());
  d.send(agui("n-bad", "n-bad", [user("n-bad", "x")], { tools: [{ name: "x" }] }));
  bad.push(await d.next());
  const again = (d.send(agui("n-t", "n-r4", [user("n-u4", "again")])), await until(d, isAguiTerminal));
  out.default = [text, busy, bad, again];
  closes.default = await d.close();

  // guarded: a permission gate, approved by a tool message, on one socket
  const g = await open(`${base}/v1/ag-ui/agents/guarded/ws`);
  const ask = [user("n-g", '/call calculator {"expression":"1+1"}')];
  const gate = (g.send(agui("n-g", "n-g1", ask)), await until(g, isAguiTerminal));
  const callId = gate.find((m) => m.type === "TOOL_CALL_START").toolCallId;
  const approve = { id: "n-g-tool", role: "tool", toolCallId: callId, content: "approved" };
  const approved = (g.send(agui("n-g", "n-g2", [...ask, approve])), await until(g, isAguiTerminal));
  out.guarded = [gate, approved];
  closes.guarded = await g.close();

  // frontend: a client-executed tool answered by the client, on one socket
  const f = await open(`${base}/v1/ag-ui/agents/frontend/ws`);
  const question = [user("n-f", '/call ask_user {"question":"?"}')];
  const asked = (f.send(agui("n-f", "n-f1", question)), await until(f, isAguiTerminal));
  const askId = asked.find((m) => m.type === "TOOL_CALL_START").toolCallId;
  const answer = { id: "n-f-tool", role: "tool", toolCallId: askId, content: "forty-two" };
  const answered = (f.send(agui("n-f", "n-f2", [...question, answer])), await until(f, isAguiTerminal));
  out.frontend = [asked, answered];
  closes.frontend = await f.close();

  return { ...out, closes };
}

const uiUser = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });
const chat = (threadId, messages, extra = {}) => ({ id: threadId, messages, trigger: "submit-message", ...extra });

async function aisdkMode() {
  const s = await open(`${base}/v1/ai-sdk/ws`);
  const text = (s.send(chat("n-a", [uiUser("n-a1", "hi from node")])), await until(s, isDone));

  // guarded, approved (agent named in the body), then frontend answered: all on this one socket
  const ask = uiUser("n-g1", '/call calculator {"expression":"1+1"}');
  const gate = (s.send(chat("n-ag", [ask], { agentId: "guarded" })), await until(s, isDone));
  const request = gate.find((m) => m.type === "tool-approval-request");
  const input = gate.find((m) => m.type === "tool-input-available");
  const assistantId = gate.find((m) => m.type === "start").messageId;
  const approvedPart = {
    type: "tool-calculator", toolCallId: request.toolCallId, state: "approval-responded", input: input.input,
    approval: { id: request.approvalId, approved: true },
  };
  const assistant = { id: assistantId, role: "assistant", parts: [approvedPart] };
  const approved = (s.send(chat("n-ag", [ask, assistant], { agentId: "guarded" })), await until(s, isDone));

  const question = uiUser("n-f1", '/call ask_user {"question":"?"}');
  const asked = (s.send(chat("n-af", [question], { agentId: "frontend" })), await until(s, isDone));
  const call = asked.find((m) => m.type === "tool-input-available");
  const askedId = asked.find((m) => m.type === "start").messageId;
  const outputPart = {
    type: "tool-ask_user", toolCallId: call.toolCallId, state: "output-available", input: call.input,
    output: "forty-two",
  };
  const answerMessage = { id: askedId, role: "assistant", parts: [outputPart] };
  const answered = (s.send(chat("n-af", [question, answerMessage], { agentId: "frontend" })), await until(s, isDone));
  const close = await s.close();
  return { text, gate, approved, asked, answered, close };
}

const modes = { agui: aguiMode, aisdk: aisdkMode };
try {
  const result = await modes[mode]();
  process.stdout.write(JSON.stringify(result));
} catch (error) {
  console.error(error);
  process.exit(1);
}
