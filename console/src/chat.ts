// The chat: pick an agent and a protocol (AG-UI or AI SDK, over SSE or a WebSocket, or a Managed Agents
// session), talk, watch the stream, answer gates and client tools, then open the session the ledger committed.

import type { UIMessage } from "ai";

import { agents, clientTools } from "./agents";
import { AiSdkChat, aguiAgent, type Transport } from "./clients";
import { h } from "./dom";
import { ManagedChat } from "./managed";
import { aguiMessages, uiMessages } from "./render";
import { shownStatus } from "./status";

type Protocol = "ai-sdk" | "ag-ui" | "managed";
let counter = 0;
const newId = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${(++counter).toString(36)}`;

export async function chatPage(view: HTMLElement, signal: AbortSignal): Promise<void> {
  const { default: fallback, agents: list } = await agents();
  const saved = new URLSearchParams(location.hash.split("?")[1] ?? "");
  const choice = {
    agent: saved.get("agent") ?? fallback,
    protocol: (saved.get("protocol") ?? "ai-sdk") as Protocol,
    transport: (saved.get("transport") ?? "sse") as Transport,
  };
  let threadId = newId("console");
  let status = "ready";
  let error = "";
  let aisdk: AiSdkChat | null = null;
  let agui: ReturnType<typeof aguiAgent> | null = null;
  let managed: ManagedChat | null = null;

  const select = (id: string, label: string, value: string, options: [string, string][], set: (v: string) => void) => {
    const node = h("select", { id, "aria-label": label }, options.map(([v, text]) => h("option", { value: v, selected: v === value }, text)));
    node.addEventListener("change", () => { set(node.value); reset(); });
    return h("label", {}, h("span", {}, label), node);
  };
  const controls = h("div", { class: "filters" },
    select("chat-agent", "Agent", choice.agent, list.map((a) => [a.id, a.id]), (v) => { choice.agent = v; }),
    select("chat-protocol", "Protocol", choice.protocol, [["ai-sdk", "AI SDK"], ["ag-ui", "AG-UI"], ["managed", "Managed Agents"]], (v) => { choice.protocol = v as Protocol; }),
    select("chat-transport", "Transport", choice.transport, [["sse", "SSE"], ["ws", "WebSocket"]], (v) => { choice.transport = v as Transport; }),
    h("button", { id: "new-chat", type: "button", onclick: () => reset() }, "New chat"));
  const info = h("div", { class: "meta" });
  const statusLine = h("div", { id: "chat-status", class: "status-line", role: "status" });
  const transcript = h("div", { id: "transcript", class: "transcript" });
  const input = h("textarea", { id: "chat-input", rows: 2, placeholder: "Message (Enter sends, Shift+Enter for a new line)", "aria-label": "message" });
  const send = h("button", { id: "chat-send", type: "submit" }, "Send");
  const stop = h("button", { id: "chat-stop", type: "button", onclick: () => {
    aisdk?.stop();
    agui?.abortRun();
    if (managed) void managed.send([{ type: "user.interrupt" }]);
  } }, "Stop");
  const composer = h("form", { id: "composer", class: "composer" }, input, send, stop);
  view.replaceChildren(h("h1", {}, "Chat"), controls, info, transcript, statusLine, composer);

  function reset(): void {
    aisdk?.close();
    (agui as any)?.close?.();
    managed?.close();
    aisdk = null;
    agui = null;
    managed = null;
    threadId = newId("console");
    error = "";
    status = "ready";
    history.replaceState(null, "", `#/chat?${new URLSearchParams(choice)}`);
    ensure();
    draw();
  }

  function ensure(): void {
    if (choice.protocol === "ai-sdk" && !aisdk) {
      aisdk = new AiSdkChat(threadId, choice.agent, choice.transport, [], () => draw());
    } else if (choice.protocol === "ag-ui" && !agui) {
      agui = aguiAgent(threadId, choice.agent, choice.transport, []);
    } else if (choice.protocol === "managed" && !managed) {
      managed = new ManagedChat(choice.agent, () => draw());  // its session id is the thread id
    }
  }

  async function runAgui(params: Record<string, unknown> = {}): Promise<void> {
    if (!agui) return;
    status = "streaming";
    draw();
    try {
      await agui.runAgent(params, {
        onMessagesChanged: () => draw(),
        onRunErrorEvent: ({ event }) => { error = `${(event as any).code ?? "RUN_ERROR"}: ${event.message}`; },
      });
    } catch (err) {
      error ||= String(err);
    }
    status = "ready";
    draw();
  }

  const tools = () => clientTools(list, choice.agent);
  const resumes = new Map<string, unknown>();
  const actions = {
    decide: (call: { toolCallId: string; approvalId?: string }, approved: boolean, reason: string) => {
      if (managed) void managed.decide(call.toolCallId, approved, reason);
      else if (aisdk && call.approvalId) void aisdk.decide(call.approvalId, approved, reason);
      else if (agui) {
        // A 1.x agent was handed the gates as interrupts: they are answered together in resume[].
        const open = agui.pendingInterrupts ?? [];
        const interrupt = open.find((i) => i.toolCallId === call.toolCallId);
        if (interrupt) {
          resumes.set(interrupt.id, { interruptId: interrupt.id, status: "resolved",
                                      payload: approved ? { approved } : { approved, reason: reason || "denied by a person" } });
          if (open.every((i) => resumes.has(i.id))) {
            const resume = open.map((i) => resumes.get(i.id));
            resumes.clear();
            void runAgui({ resume });
          }
          return;
        }
        const message: any = { id: newId("decision"), role: "tool", toolCallId: call.toolCallId, content: approved ? "approved" : "denied" };
        if (!approved) message.error = reason || "denied by a person";
        agui.addMessage(message);
        void runAgui();
      }
    },
    answer: (call: { toolCallId: string; tool: string }, text: string) => {
      if (managed) void managed.answer(call.toolCallId, text);
      else if (aisdk) void aisdk.answer(call.tool, call.toolCallId, text);
      else if (agui) {
        agui.addMessage({ id: newId("answer"), role: "tool", toolCallId: call.toolCallId, content: JSON.stringify({ answer: text }) } as any);
        void runAgui();
      }
    },
  };

  function draw(): void {
    if (signal.aborted) return;
    const messages = aisdk ? aisdk.messages : managed ? managed.messages : (agui?.messages ?? []);
    const failure = aisdk?.error ? aisdk.error.message : managed ? managed.error : error;
    const current = shownStatus(aisdk ? aisdk.status : managed ? managed.status : status, failure);
    if (managed?.sessionId) threadId = managed.sessionId;
    const live = current === "ready" || current === "error";
    // follow the stream when the newest words were in sight; otherwise keep the reader's place
    const following = transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 40;
    const place = transcript.scrollTop;
    transcript.replaceChildren(messages.length === 0 ? h("p", { class: "muted" }, "No messages yet.") :
      aisdk ? uiMessages(messages as UIMessage[], tools(), actions, live) : aguiMessages(messages as any[], tools(), actions, live));
    transcript.scrollTop = following ? transcript.scrollHeight : place;
    info.replaceChildren(h("span", {}, "Thread "), h("code", { id: "chat-thread" }, threadId), " · ",
      messages.length ? h("a", { id: "open-session", href: `#/sessions/${encodeURIComponent(threadId)}` }, "Open this session") :
        h("span", { class: "muted" }, "nothing committed yet"));
    statusLine.dataset.status = current;
    statusLine.replaceChildren(h("span", { class: `badge status-${current}` }, current),
      ...(failure ? [h("span", { id: "chat-error", class: "error-text" }, ` ${failure}`)] : []));
    send.disabled = !live;
    stop.disabled = live;
  }

  composer.addEventListener("submit", (e) => {
    e.preventDefault();
    const text = input.value;
    if (!text.trim() || send.disabled) return;
    input.value = "";
    error = "";
    ensure();
    if (aisdk) void aisdk.sendMessage({ text });
    else if (managed) void managed.sendText(text);
    else if (agui) {
      agui.addMessage({ id: newId("user"), role: "user", content: text });
      void runAgui();
    }
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      composer.requestSubmit();
    }
  });
  signal.addEventListener("abort", () => { aisdk?.close(); (agui as any)?.close?.(); managed?.close(); });
  ensure();
  draw();
}
