// Drives Awaken's WebSocket routes with the `ws` package (permessage-deflate on, as browsers do).
//
//   node ws_client.mjs agui  ws://127.0.0.1:PORT
//   node ws_client.mjs aisdk ws://127.0.0.1:PORT
//   node ws_client.mjs agui-shared  ws://127.0.0.1:PORT <agui-client-1 | agui-client-0059>
//   node ws_client.mjs aisdk-shared ws://127.0.0.1:PORT <ai-6 | ai-6-0-0 | ai-7>
//
// Prints one JSON object on stdout: the messages each step received, grouped per socket, and the
// close code each socket ended with. The Python tests (tests/test_ws_*.py) assert on it.
//
// The two "-shared" modes put the real client libraries on the socket: HttpAgents (AG-UI) or
// AbstractChats with a DefaultChatTransport (AI SDK) whose `fetch` is a WebSocket adapter, as an app
// would write one (`openShared`). Each request is sent as one text message; its reply is the socket's
// messages up to and including its end (RUN_FINISHED / RUN_ERROR, or [DONE]), matched to requests in
// the order they were sent, and handed to the client as the SSE body the POST route would return. The
// client then runs its whole pipeline over it: schema checks, sequence verification (@ag-ui/client's
// verifyEvents), chunk processing (the AI SDK's uiMessageChunkSchema and message state). A refusal
// interleaved into a running stream breaks both that run and the refused request's reply.
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
        ping: () => pingPong(ws),
        close: () =>
          new Promise((res) => {
            ws.on("close", (code) => ((closeCode = code), res(closeCode)));
            ws.close(1000);
          }),
      }),
    );
  });
}

/** Resolves on the pong to a ping sent now: the server has read every message sent before it. */
function pingPong(ws) {
  return within(new Promise((res) => (ws.once("pong", () => res()), ws.ping())), "a pong");
}

// The runs that must still stream while other messages arrive say `/hold NAME` (the scripted model
// streams one delta, then waits for a run saying `/release NAME`): no timing window, whatever the load.
// Each test has a server of its own, so the gate is new. The release waits until the held socket's
// earlier messages were read: a ping on that socket first (the pong follows every earlier message into
// the server), then the releasing run on a socket of its own.
const HOLD = "slow";
const SLOW = `/hold ${HOLD}\n/words 12`;

async function release(url, body, isEnd, held) {
  await held.ping();
  const r = await open(url);
  r.send(body);
  await until(r, isEnd);
  await r.close();
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
  d.send(agui("n-t", "n-r2", [user("n-u2", SLOW)]));
  const busy = [];
  for (;;) {
    const m = await d.next();
    busy.push(m);
    if (m.type === "TEXT_MESSAGE_CONTENT") break;
  }
  d.send(agui("n-other", "n-r3", [user("n-u3", "too soon")]));
  await release(`${base}/v1/ag-ui/ws`, agui("n-rel", "n-rel", [user("n-rel", `/release ${HOLD}`)]), isAguiTerminal, d);
  busy.push(...(await until(d, (m) => m.type === "RUN_FINISHED")));
  busy.push(await d.next()); // the refusal: after the run's terminal event, never inside the run
  const bad = [];
  d.send("{not json");
  bad.push(await d.next());
  d.ws.send(Buffer.from([0, 1, 2]), { binary: true });
  bad.push(await d.next());
  d.send(agui("n-bad", "n-bad", [user("n-bad", "x")], { forwardedProps: { x: 1 } }));
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

// -- real clients over one shared socket ---------------------------------------------------------------

const SSE = new TextEncoder();

/** A WebSocket adapter for the HTTP clients: `fetch` sends the body as one message and answers with the
 * reply's messages as an SSE body; replies are the messages up to each `isEnd`, in request order. */
function openShared(url, isEnd) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const log = []; // every message on the socket, in order
    const stray = []; // messages that arrived with no request waiting (must stay empty)
    const cancelled = []; // requests (numbered from 1 in send order) whose reply the client stopped reading
    const replies = []; // per request still waiting for its end: {controller, messages, resolve}
    const seenWaiters = [];
    const sentWaiters = [];
    let sent = 0;

    ws.on("message", (data) => {
      const text = data.toString();
      const message = text === "[DONE]" ? text : JSON.parse(text);
      log.push(message);
      const reply = replies[0];
      if (!reply) stray.push(message);
      else {
        reply.messages.push(message);
        if (!reply.cancelled) reply.controller.enqueue(SSE.encode(`data: ${text}\n\n`));
        if (isEnd(message)) {
          replies.shift();
          if (!reply.cancelled) reply.controller.close();
          reply.resolve(reply.messages);
        }
      }
      for (const w of seenWaiters.filter((w) => w.pred(message))) {
        seenWaiters.splice(seenWaiters.indexOf(w), 1);
        w.resolve();
      }
    });

    function request(body, binary = false) {
      const reply = { number: sent + 1, messages: [] };
      const done = new Promise((res) => (reply.resolve = res));
      // A client may stop reading a reply early (cancel): the rest of that reply is still its own.
      const stream = new ReadableStream({
        start: (controller) => void (reply.controller = controller),
        cancel: () => void ((reply.cancelled = true), cancelled.push(reply.number)),
      });
      replies.push(reply);
      ws.send(body, { binary });
      sent += 1;
      for (const w of sentWaiters.filter((w) => sent >= w.n)) {
        sentWaiters.splice(sentWaiters.indexOf(w), 1);
        w.resolve();
      }
      return { stream, done };
    }

    ws.on("error", reject);
    ws.on("open", () =>
      resolve({
        log,
        stray,
        cancelled,
        request,
        fetch: async (_url, init) =>
          new Response(request(init.body).stream, {
            status: 200,
            headers: { "content-type": "text/event-stream" },
          }),
        seen: (pred) =>
          within(
            log.some(pred) ? Promise.resolve() : new Promise((resolve) => seenWaiters.push({ pred, resolve })),
            `a message the test waits for (log: ${JSON.stringify(log)})`,
          ),
        ping: () => pingPong(ws),
        sent: (n) =>
          sent >= n ? Promise.resolve() : new Promise((res) => sentWaiters.push({ n, resolve: res })),
        close: () =>
          new Promise((res) => {
            ws.on("close", (code) => res(code));
            ws.close(1000);
          }),
      }),
    );
  });
}

/** `promise`, or an error after 10 s (so a broken server fails the script instead of hanging it). */
function within(promise, what) {
  let timer;
  const timeout = new Promise((_, rej) => {
    timer = setTimeout(() => rej(new Error(`timed out waiting for ${what}`)), 10000);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** What the client libraries log (warnings, "Agent execution failed", ...), kept instead of printed. */
function captureConsole() {
  const logs = [];
  for (const level of ["log", "info", "warn", "error", "debug"]) {
    const show = (a) => (typeof a === "string" ? a : a instanceof Error ? a.message : JSON.stringify(a));
    console[level] = (...args) => void logs.push(`${level}: ${args.map(show).join(" ")}`);
  }
  return logs;
}

// A run that streams (12 deltas, held after the first: SLOW) until three more messages have arrived:
// a request, a binary message and a second request, sent in that order while it streams; then the
// run's thread takes its next turn on the same socket.
// Thread and chat ids are new per invocation: a rerun against the same server starts fresh threads.
const tag = Math.random().toString(36).slice(2, 8);

async function aguiSharedMode(pkg) {
  const { HttpAgent } = await import(pkg);
  const logs = captureConsole();
  const s = await openShared(`${base}/v1/ag-ui/ws`, isAguiTerminal);
  const agent = (threadId, content) =>
    new HttpAgent({ url: `${base}/v1/ag-ui/ws`, threadId, initialMessages: [user(`${threadId}-u1`, content)],
                    initialState: {}, fetch: s.fetch });

  async function run(agent, runId) {
    const record = { types: [], errors: [] };
    try {
      const { newMessages } = await agent.runAgent({ runId }, {
        onEvent: ({ event }) => void record.types.push(event.type),
        onRunErrorEvent: ({ event }) => void record.errors.push({ code: event.code, message: event.message }),
      });
      record.newMessages = newMessages;
    } catch (err) {
      record.failed = String(err && err.message ? err.message : err);
    }
    return record;
  }

  const slow = agent(`n-slow-${tag}`, SLOW);
  const first = run(slow, `n-slow-r1-${tag}`);
  await s.seen((m) => m.type === "TEXT_MESSAGE_CONTENT");
  const busy = run(agent(`n-busy-${tag}`, "too soon"), `n-busy-r1-${tag}`);
  await s.sent(2);
  const binary = s.request(Buffer.from([0, 1, 2]), true).done;
  const busy2 = run(agent(`n-busy2-${tag}`, "still too soon"), `n-busy2-r1-${tag}`);
  await s.sent(4);
  await within(release(`${base}/v1/ag-ui/ws`, agui(`n-rel-${tag}`, `n-rel-${tag}`, [user(`n-rel-${tag}`, `/release ${HOLD}`)]),
                       isAguiTerminal, s), "the release");
  const all = Promise.all([first, busy, binary, busy2]);
  const [slowRun, busyRun, binaryReply, busy2Run] = await within(all, "the four replies");
  slow.addMessage(user(`n-slow-u2-${tag}`, "again"));
  const again = await within(run(slow, `n-slow-r2-${tag}`), "the next turn");
  const close = await s.close();
  return { slow: slowRun, busy: busyRun, binary: binaryReply, busy2: busy2Run, again, messages: slow.messages,
           log: s.log, stray: s.stray, cancelled: s.cancelled, close, logs };
}

async function aisdkSharedMode(lib) {
  const ai = await import(lib);
  const logs = captureConsole();
  const s = await openShared(`${base}/v1/ai-sdk/ws`, isDone);
  const transport = new ai.DefaultChatTransport({ api: `${base}/v1/ai-sdk/ws`, fetch: s.fetch });

  class Chat extends ai.AbstractChat {
    constructor(id) {
      const state = {
        status: "ready",
        error: undefined,
        messages: [],
        pushMessage: (m) => void (state.messages = [...state.messages, m]),
        popMessage: () => void (state.messages = state.messages.slice(0, -1)),
        replaceMessage: (i, m) => void (state.messages = state.messages.map((x, j) => (j === i ? m : x))),
        snapshot: (v) => structuredClone(v),
      };
      super({ id, transport, state, onError: () => {} });
    }

    view() {
      return { status: this.status, error: this.error ? this.error.message : null, messages: this.messages };
    }
  }

  const ask = (chat, text) => chat.sendMessage({ text }).then(() => chat.view());
  const slow = new Chat(`n-a-slow-${tag}`);
  const first = ask(slow, SLOW);
  await s.seen((m) => m !== "[DONE]" && m.type === "text-delta");
  const busy = ask(new Chat(`n-a-busy-${tag}`), "too soon");
  await s.sent(2);
  const binary = s.request(Buffer.from([1, 2]), true).done;
  const busy2 = ask(new Chat(`n-a-busy2-${tag}`), "still too soon");
  await s.sent(4);
  await within(release(`${base}/v1/ai-sdk/ws`, chat(`n-a-rel-${tag}`, [uiUser(`n-a-rel-${tag}`, `/release ${HOLD}`)]),
                       isDone, s), "the release");
  const all = Promise.all([first, busy, binary, busy2]);
  const [slowView, busyView, binaryReply, busy2View] = await within(all, "the four replies");
  const again = await within(ask(slow, "again"), "the next turn");
  const close = await s.close();
  return { slow: slowView, busy: busyView, binary: binaryReply, busy2: busy2View, again, log: s.log,
           stray: s.stray, cancelled: s.cancelled, close, logs };
}

const modes = {
  agui: aguiMode,
  aisdk: aisdkMode,
  "agui-shared": () => aguiSharedMode(process.argv[4] ?? "agui-client-1"),
  "aisdk-shared": () => aisdkSharedMode(process.argv[4] ?? "ai-6"),
};
try {
  const result = await modes[mode]();
  process.stdout.write(JSON.stringify(result));
} catch (error) {
  process.stderr.write(`${error && error.stack ? error.stack : error}\n`);
  process.exit(1);
}
