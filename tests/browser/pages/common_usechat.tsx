// The useChat page, whichever AI SDK generation drives it (usechat.tsx: ai@6 + @ai-sdk/react 3;
// usechat7.tsx: ai@7 + @ai-sdk/react 4). On another origin than the server: DefaultChatTransport posts to
// /v1/ai-sdk/agents/{agent}/chat; the chat id is the thread id. On load it reads the thread's history
// and starts from it, so a reload shows the conversation. Approvals (agent `guarded`) and the
// browser-executed `ask_user` (agent `frontend`) are answered with buttons. Each answer has a
// "Regenerate" button (`regenerate({ messageId })`), the page a "Regenerate the last answer" one
// (`regenerate()`), and each user message an "Edit" one (`sendMessage({ text, messageId })`): threads
// that branch (docs/branches.md).
import { useEffect, useMemo, useState } from "react";
import { createRoot } from "react-dom/client";

import { agentId, authHeaders, publish, readHistory, server, thread } from "./common";

type UIMessage = any;

/** What a page takes from its AI SDK generation. */
export type Library = {
  useChat: (options: any) => any;
  DefaultChatTransport: new (options: { api: string; headers?: any }) => any;
  lastAssistantMessageIsCompleteWithApprovalResponses: (options: any) => boolean;
  lastAssistantMessageIsCompleteWithToolCalls: (options: any) => boolean;
};

const api = `${server}/v1/ai-sdk/agents/${encodeURIComponent(agentId)}/chat`;
let lib: Library;
let page = "usechat";

type Actions = {
  approve: (approvalId: string, approved: boolean) => void;
  answer: (tool: string, toolCallId: string, answer: string) => void;
};

function ToolPart({ part, actions }: { part: any; actions: Actions }) {
  const name = part.type === "dynamic-tool" ? part.toolName : part.type.slice("tool-".length);
  const [answer, setAnswer] = useState("");
  return (
    <div className="part tool" data-tool={name} data-state={part.state} data-call={part.toolCallId}>
      <code>{name}({JSON.stringify(part.input ?? {})})</code>
      {part.state === "approval-requested" && (
        <span>
          {" "}
          <button className="approve" onClick={() => actions.approve(part.approval.id, true)}>Approve</button>
          <button className="deny" onClick={() => actions.approve(part.approval.id, false)}>Deny</button>
        </span>
      )}
      {part.state === "input-available" && name === "ask_user" && (
        <span>
          {" "}
          <input className="answer-text" value={answer} onChange={(e) => setAnswer(e.target.value)} />
          <button className="answer" onClick={() => actions.answer(name, part.toolCallId, answer)}>Answer</button>
        </span>
      )}
      {part.state === "output-available" && <span className="output"> → {JSON.stringify(part.output)}</span>}
      {part.state === "output-error" && <span className="output"> ✗ {part.errorText}</span>}
      {part.state === "output-denied" && <span className="output"> denied</span>}
    </div>
  );
}

function Part({ part, actions }: { part: any; actions: Actions }) {
  if (part.type === "text") return <p className="part text">{part.text}</p>;
  if (part.type === "reasoning") return <p className="part reasoning">thinking: {part.text}</p>;
  if (part.type === "dynamic-tool" || part.type.startsWith("tool-")) return <ToolPart part={part} actions={actions} />;
  return null; // step-start, data parts
}

function Chat({ initial, historyStatus }: { initial: UIMessage[]; historyStatus: number }) {
  const transport = useMemo(() => new lib.DefaultChatTransport({ api, headers: authHeaders }), []);
  const resendWhen =
    agentId === "guarded" ? lib.lastAssistantMessageIsCompleteWithApprovalResponses
    : agentId === "frontend" ? lib.lastAssistantMessageIsCompleteWithToolCalls
    : undefined;
  const { messages, sendMessage, regenerate, status, error, addToolApprovalResponse, addToolOutput } = lib.useChat({
    id: thread,
    messages: initial,
    transport,
    sendAutomaticallyWhen: resendWhen,
  });
  const [input, setInput] = useState("");
  const [editing, setEditing] = useState<{ id: string; text: string } | null>(null);
  const actions: Actions = {
    approve: (id, approved) => void addToolApprovalResponse({ id, approved }),
    answer: (tool, toolCallId, answer) => void addToolOutput({ tool: tool as never, toolCallId, output: { answer } }),
  };
  useEffect(() => {
    publish({ page, thread, agent: agentId, status, error: error?.message ?? null, messages, historyStatus });
  }, [status, error, messages, historyStatus]);
  return (
    <main>
      <h1>useChat · agent {agentId} · thread {thread}</h1>
      <div id="status" data-status={status}>{status}</div>
      {error && <div id="error">{error.message}</div>}
      <ol id="messages">
        {messages.map((m: UIMessage) => (
          <li key={m.id} className="message" data-role={m.role} data-id={m.id}>
            <b>{m.role}</b>
            {m.parts.map((p: any, i: number) => <Part key={i} part={p} actions={actions} />)}
          </li>
        ))}
      </ol>
      {/* outside #messages, so what #messages reads stays the conversation alone */}
      <ul id="controls">
        {messages.map((m: UIMessage) => (
          <li key={m.id} data-id={m.id} data-role={m.role}>
            {m.role === "assistant" && (
              <button className="regenerate" disabled={status !== "ready"}
                onClick={() => void regenerate({ messageId: m.id })}>Regenerate {m.id}</button>
            )}
            {m.role === "user" && editing?.id !== m.id && (
              <button className="edit" disabled={status !== "ready"} onClick={() => setEditing({ id: m.id,
                text: m.parts.filter((p: any) => p.type === "text").map((p: any) => p.text).join("") })}>Edit {m.id}</button>
            )}
            {m.role === "user" && editing?.id === m.id && (
              <form className="edit-form" onSubmit={(e) => {
                e.preventDefault();
                void sendMessage({ text: editing.text, messageId: m.id });
                setEditing(null);
              }}>
                <input className="edit-text" value={editing.text}
                  onChange={(e) => setEditing({ id: m.id, text: e.target.value })} />
                <button className="edit-save" type="submit">Save</button>
              </form>
            )}
          </li>
        ))}
      </ul>
      <button id="regenerate-last" type="button" disabled={status !== "ready" || messages.length === 0}
        onClick={() => void regenerate()}>Regenerate the last answer</button>
      <form id="composer" onSubmit={(e) => {
        e.preventDefault();
        void sendMessage({ text: input });
        setInput("");
      }}>
        <textarea id="input" value={input} onChange={(e) => setInput(e.target.value)} />
        <button id="send" type="submit" disabled={status !== "ready" || input === ""}>Send</button>
      </form>
    </main>
  );
}

async function main() {
  const history = await readHistory(`/v1/ai-sdk/threads/${encodeURIComponent(thread)}/messages`);
  createRoot(document.getElementById("root")!).render(<Chat initial={history.items} historyStatus={history.status} />);
}

/** Render the chat with ``library`` and publish its state under ``name``. */
export function mount(library: Library, name: string): void {
  lib = library;
  page = name;
  main().catch((err) => {
    publish({ page, fatal: String(err) });
    document.body.textContent = `fatal: ${err}`;
  });
}
