// Drive a live Awaken server with the real AI SDK client, exactly as useChat does (no React):
// an AbstractChat subclass over a plain state object (reference/aisdk.md §5), DefaultChatTransport,
// and the sendAutomaticallyWhen predicates for client tools and approvals.
//
//   node tests/node/aisdk_client.mjs <baseUrl> <scenario> <lib: ai-6-0-0 | ai-6 | ai-7> <chatId> [headers JSON] [extra JSON]
//
// [headers JSON] (optional) is passed as DefaultChatTransport's `headers` (e.g. {"Authorization": "Bearer …"})
// and sent with the history GETs too.
// [extra JSON] (optional) {agent, text} points approve/deny at another agent and tool call (e.g. an MCP tool),
// and is the one turn of scenario `say`.
//
// Prints one JSON object on stdout: {status, error, messages, requests: [{url, body, sse}], history}.
// `requests` counts every POST the client made (fetch is wrapped), `sse` is each raw response body,
// `history` is the whole GET /v1/ai-sdk/threads/{chatId}/messages, paged with a small limit.
// Exit code 0 unless the script itself failed (a chat error is reported in `status`/`error`).

const [baseUrl, scenario, lib = "ai-6", chatId = `chat-${Date.now()}`, headersArg, extraArg] = process.argv.slice(2);
const headers = headersArg ? JSON.parse(headersArg) : {};
const extra = extraArg ? JSON.parse(extraArg) : {};
const ai = await import(lib);
const { AbstractChat, DefaultChatTransport } = ai;

const TIMEOUT_MS = 15000;

class Chat extends AbstractChat {
  constructor(init) {
    const state = {
      status: "ready",
      error: undefined,
      messages: [],
      pushMessage: (m) => { state.messages = [...state.messages, m]; },
      popMessage: () => { state.messages = state.messages.slice(0, -1); },
      replaceMessage: (i, m) => { state.messages = state.messages.map((x, j) => (j === i ? m : x)); },
      snapshot: (v) => structuredClone(v),
    };
    super({ ...init, state });
  }
}

const requests = [];
async function countingFetch(url, init) {
  const record = { url: String(url), body: JSON.parse(init.body), sse: null };
  requests.push(record);
  const response = await fetch(url, init);
  if (!response.body) return response;
  const [forClient, forRecord] = response.body.tee();
  record.done = new Response(forRecord).text().then((text) => { record.sse = text; });
  return new Response(forClient, { status: response.status, statusText: response.statusText, headers: response.headers });
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// Wait until the chat is idle: status ready/error. Status moves to "submitted" synchronously when an
// automatic resend starts, so an idle status observed here is final; poll, never a fixed sleep.
async function settled(chat) {
  const deadline = Date.now() + TIMEOUT_MS;
  while (chat.status !== "ready" && chat.status !== "error") {
    if (Date.now() > deadline) throw new Error(`chat did not settle (status ${chat.status})`);
    await sleep(5);
  }
}

function makeChat(agent, options = {}) {
  const api = agent ? `${baseUrl}/v1/ai-sdk/agents/${agent}/chat` : `${baseUrl}/v1/ai-sdk/chat`;
  return new Chat({
    id: chatId,
    transport: new DefaultChatTransport({ api, fetch: countingFetch, headers }),
    onError: () => {},
    ...options,
  });
}

function lastToolPart(chat, state) {
  const last = chat.messages[chat.messages.length - 1];
  return last?.parts.find((p) => (p.type.startsWith("tool-") || p.type === "dynamic-tool") && p.state === state);
}

async function approval(approved, reason) {
  const chat = makeChat(extra.agent ?? "guarded", {
    sendAutomaticallyWhen: ai.lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  await chat.sendMessage({ text: extra.text ?? '/call calculator {"expression":"2+3"}' });
  await settled(chat);
  const part = lastToolPart(chat, "approval-requested");
  if (!part) throw new Error(`no approval request; status ${chat.status}: ${JSON.stringify(chat.messages)}`);
  await chat.addToolApprovalResponse({ id: part.approval.id, approved, ...(reason ? { reason } : {}) });
  await settled(chat);
  return chat;
}

const scenarios = {
  async text() {
    const chat = makeChat();
    await chat.sendMessage({ text: "/think pondering\nhello there" });
    await settled(chat);
    return chat;
  },
  async "server-tool"() {
    const chat = makeChat("assistant");
    await chat.sendMessage({ text: '/call calculator {"expression":"2+3"}' });
    await settled(chat);
    return chat;
  },
  approve: () => approval(true),
  deny: () => approval(false, "not now"),
  async "client-tool"() {
    const chat = makeChat("frontend", {
      sendAutomaticallyWhen: ai.lastAssistantMessageIsCompleteWithToolCalls,
      onToolCall: ({ toolCall }) => {
        // not awaited: onToolCall runs inside the chat's serial job (awaiting would deadlock)
        void chat.addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output: { answer: "blue" } });
      },
    });
    await chat.sendMessage({ text: '/call ask_user {"question":"?"}' });
    await settled(chat);
    return chat;
  },
  async "multi-turn"() {
    const chat = makeChat();
    await chat.sendMessage({ text: "first" });
    await settled(chat);
    await chat.sendMessage({ text: "second" });
    await settled(chat);
    return chat;
  },
  // Five long turns (14 KB each): from the third on, each request resends a history the server has
  // parsed before (its replay memo splits it off and parses only the new messages).
  async "long-history"() {
    const chat = makeChat();
    for (let turn = 1; turn <= 5; turn++) {
      await chat.sendMessage({ text: `turn ${turn}: ${"lorem ipsum dolor ".repeat(800)}` });
      await settled(chat);
    }
    return chat;
  },
  // One turn saying extra.text to extra.agent (e.g. a server tool that streams progress).
  async say() {
    const chat = makeChat(extra.agent ?? "assistant");
    await chat.sendMessage({ text: extra.text });
    await settled(chat);
    return chat;
  },
  async fail() {
    const chat = makeChat();
    await chat.sendMessage({ text: "/fail\nhello" });
    await settled(chat);
    return chat;
  },
  async history() {
    const chat = makeChat("assistant");
    await chat.sendMessage({ text: "/think ponder\nhi" });
    await settled(chat);
    await chat.sendMessage({ text: '/call calculator {"expression":"6*7"}\n/call current_time {}' });
    await settled(chat);
    await chat.sendMessage({ text: "/words 3" });
    await settled(chat);
    return chat;
  },
};

async function readHistory(limit) {
  const items = [];
  let cursor = "";
  for (let page = 0; page < 100; page++) {
    const url = `${baseUrl}/v1/ai-sdk/threads/${encodeURIComponent(chatId)}/messages?limit=${limit}` +
      (cursor ? `&cursor=${encodeURIComponent(cursor)}` : "");
    const response = await fetch(url, { headers });
    if (response.status !== 200) return { status: response.status, body: await response.text() };
    const body = await response.json();
    if (body.items.length === 0) break;
    for (const item of body.items) {
      const at = items.findIndex((m) => m.id === item.id);  // a page may re-send a message whole
      if (at >= 0) items[at] = item; else items.push(item);
    }
    cursor = body.cursor;
  }
  return { status: 200, items };
}

const run = scenarios[scenario];
if (!run) {
  console.error(`unknown scenario ${scenario}`);
  process.exit(2);
}
const chat = await run();
await Promise.all(requests.map((r) => r.done));
const history = await readHistory(2);
process.stdout.write(JSON.stringify({
  lib,
  status: chat.status,
  error: chat.error ? String(chat.error.message ?? chat.error) : null,
  messages: chat.messages,
  requests: requests.map(({ url, body, sse }) => ({ url, body, sse })),
  history,
}));
