// A useChat app on Awaken (ai 6 with @ai-sdk/react 3), served from its own origin.
//
//   index.html?server=http://127.0.0.1:8000&agent=helper&thread=<id>
//
// * the chat id is Awaken's thread id: it is kept in localStorage, so a reload continues the thread;
// * on open the thread's history is read (GET /v1/ai-sdk/threads/{id}/messages, page by page) and
//   given to useChat as its first messages;
// * resume: true rejoins a run still streaming after a reload (the agent says on_disconnect = "continue");
// * a tool gated by `permission = "ask"` shows Approve / Deny (addToolApprovalResponse), and the answer
//   goes back by itself thanks to sendAutomaticallyWhen;
// * `get_browser_info` is a tool the browser runs (onToolCall + addToolOutput).
import { useChat } from "@ai-sdk/react";
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
  type UIMessage,
} from "ai";
import { useMemo, useState } from "react";
import { createRoot } from "react-dom/client";

const params = new URLSearchParams(location.search);
const server = params.get("server") ?? "http://127.0.0.1:8000";
const agent = params.get("agent") ?? "helper";
const thread = params.get("thread") ?? localStorage.getItem("awaken-thread") ?? `chat-${crypto.randomUUID()}`;
localStorage.setItem("awaken-thread", thread);

/** The thread's committed messages, oldest first (none yet: a 404). */
async function history(): Promise<UIMessage[]> {
  const items: UIMessage[] = [];
  let cursor = "";
  for (;;) {
    const url = `${server}/v1/ai-sdk/threads/${encodeURIComponent(thread)}/messages?limit=50` +
      (cursor ? `&cursor=${encodeURIComponent(cursor)}` : "");
    const response = await fetch(url);
    if (response.status === 404) return [];
    if (!response.ok) throw new Error(`history: HTTP ${response.status}`);
    const page = await response.json();
    if (page.items.length === 0) return items;
    for (const item of page.items) {  // a page may send a message again, whole: keep the newest
      const at = items.findIndex((m) => m.id === item.id);
      if (at >= 0) items[at] = item;
      else items.push(item);
    }
    cursor = page.cursor;
  }
}

function ToolPart({ part, approve }: { part: any; approve: (id: string, approved: boolean) => void }) {
  const name = part.type.slice("tool-".length);
  return (
    <div className="tool" data-tool={name} data-state={part.state}>
      <code>{name}({JSON.stringify(part.input ?? {})})</code>
      {part.state === "approval-requested" && (
        <>
          <button className="approve" onClick={() => approve(part.approval.id, true)}>Approve</button>
          <button className="deny" onClick={() => approve(part.approval.id, false)}>Deny</button>
        </>
      )}
      {part.state === "output-available" && <> → {JSON.stringify(part.output)}{part.preliminary ? " …" : ""}</>}
      {part.state === "output-error" && <span className="error"> ✗ {part.errorText}</span>}
      {part.state === "output-denied" && <> denied</>}
    </div>
  );
}

function Chat({ initial }: { initial: UIMessage[] }) {
  const transport = useMemo(
    () => new DefaultChatTransport({ api: `${server}/v1/ai-sdk/agents/${encodeURIComponent(agent)}/chat` }), []);
  const { messages, sendMessage, status, error, addToolApprovalResponse, addToolOutput } = useChat({
    id: thread,
    messages: initial,
    transport,
    resume: true,
    // approvals and browser tools send their answer back by themselves
    sendAutomaticallyWhen: (options) =>
      lastAssistantMessageIsCompleteWithApprovalResponses(options) || lastAssistantMessageIsCompleteWithToolCalls(options),
    async onToolCall({ toolCall }) {
      if (toolCall.dynamic || toolCall.toolName !== "get_browser_info") return;
      const output = { timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone, language: navigator.language };
      void addToolOutput({ tool: "get_browser_info" as never, toolCallId: toolCall.toolCallId, output });
    },
  });
  const [text, setText] = useState("");
  (window as any).__chat = { status, messages, error: error?.message ?? null };  // for the tests
  return (
    <main>
      <header>
        <h1>useChat · {agent}</h1>
        <span id="status">{status}</span>
      </header>
      {error && <p className="error">{error.message}</p>}
      {messages.map((m) => (
        <div key={m.id} className={`message ${m.role}`}>
          <div className="role">{m.role}</div>
          {m.parts.map((part: any, i) =>
            part.type === "text" ? <p key={i}>{part.text}</p>
            : part.type.startsWith("tool-") ? (
              <ToolPart key={i} part={part} approve={(id, approved) => void addToolApprovalResponse({ id, approved })} />
            ) : null)}
        </div>
      ))}
      <form onSubmit={(e) => { e.preventDefault(); void sendMessage({ text }); setText(""); }}>
        <input name="text" value={text} onChange={(e) => setText(e.target.value)} placeholder="Say something" />
        <button type="submit" disabled={status !== "ready" || !text}>Send</button>
      </form>
    </main>
  );
}

history().then(
  (initial) => createRoot(document.getElementById("root")!).render(<Chat initial={initial} />),
  (err) => { document.body.textContent = String(err); },
);
