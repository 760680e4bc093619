// An HttpAgent page (@ag-ui/client) on another origin than the server, posting to
// /v1/ag-ui/agents/{agent}. On load it reads the thread's history into `initialMessages`, so a reload
// shows the conversation. A pending call on agent `guarded` is a permission gate: the 1.x client was
// handed it as an interrupt, so Approve/Deny answer it in `resume[]` (once every open interrupt has an
// answer); a gate that is not an interrupt (rebuilt from history) is answered with a tool message
// (without `error` to allow, with it to deny). On agent `frontend` it is `ask_user`, answered with the
// text typed next to it. Each answer runs the agent again; the same server run continues.
import { HttpAgent, type Message } from "@ag-ui/client";

import { agentId, authHeaders, publish, readHistory, server, thread } from "./common";

const history = await readHistory(`/v1/ag-ui/threads/${encodeURIComponent(thread)}/messages`);
const agent = new HttpAgent({
  url: `${server}/v1/ag-ui/agents/${encodeURIComponent(agentId)}`,
  threadId: thread,
  initialMessages: history.items as Message[],
  headers: authHeaders,
});
let status = "ready";
const errors: string[] = [];
let counter = 0;
const nextId = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${++counter}`;

function el(tag: string, attrs: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElement {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  node.append(...children);
  return node;
}

function button(cls: string, label: string, onClick: () => void): HTMLElement {
  const b = el("button", { class: cls }, label);
  b.addEventListener("click", onClick);
  return b;
}

function toolMessage(toolCallId: string, content: string, prefix: string, error?: string): Message {
  const message: any = { id: nextId(prefix), role: "tool", toolCallId, content };
  if (error !== undefined) message.error = error;
  return message;
}

async function run(params: Record<string, unknown> = {}): Promise<void> {
  status = "running";
  render();
  try {
    await agent.runAgent(params, {
      onMessagesChanged: () => render(),
      onRunErrorEvent: ({ event }) => {
        errors.push(`${(event as any).code}: ${event.message}`);
      },
    });
  } catch (err) {
    errors.push(String(err));
  }
  status = "ready";
  render();
}

function answer(message: Message): void {
  agent.addMessage(message);
  void run();
}

const answers = new Map<string, any>();

function decide(callId: string, approved: boolean): void {
  const open = agent.pendingInterrupts ?? [];
  const interrupt = open.find((i: any) => i.toolCallId === callId);
  if (!interrupt) {
    answer(approved ? toolMessage(callId, "approved", "decision")
                    : toolMessage(callId, "denied", "decision", "the user said no"));
    return;
  }
  answers.set(interrupt.id, { interruptId: interrupt.id, status: "resolved",
                              payload: approved ? { approved } : { approved, reason: "the user said no" } });
  if (open.every((i: any) => answers.has(i.id))) {
    const resume = open.map((i: any) => answers.get(i.id));
    answers.clear();
    void run({ resume });
  } else {
    render();
  }
}

function renderCall(call: any, results: Map<string, any>): HTMLElement {
  const result = results.get(call.id);
  const state = result ? (result.error !== undefined ? "error" : "done") : "pending";
  const node = el("div", { class: "part tool", "data-tool": call.function.name, "data-state": state, "data-call": call.id },
    el("code", {}, `${call.function.name}(${call.function.arguments})`));
  if (result) {
    node.append(el("span", { class: "output" }, result.error !== undefined ? ` ✗ ${result.content}` : ` → ${result.content}`));
  } else if (status === "ready" && agentId === "guarded" && (agent.pendingInterrupts ?? []).some(
    (i: any) => i.toolCallId === call.id && answers.has(i.id))) {
    node.append(" (answered)");
  } else if (status === "ready" && agentId === "guarded") {
    node.append(" ",
      button("approve", "Approve", () => decide(call.id, true)),
      button("deny", "Deny", () => decide(call.id, false)));
  } else if (status === "ready" && call.function.name === "ask_user") {
    const input = el("input", { class: "answer-text" }) as HTMLInputElement;
    node.append(" ", input, button("answer", "Answer", () =>
      answer(toolMessage(call.id, JSON.stringify({ answer: input.value }), "answer"))));
  }
  return node;
}

function render(): void {
  const messages = agent.messages as any[];
  const results = new Map(messages.filter((m) => m.role === "tool").map((m) => [m.toolCallId, m]));
  const list = el("ol", { id: "messages" });
  for (const m of messages) {
    if (m.role === "tool") continue; // shown with its call
    const item = el("li", { class: "message", "data-role": m.role, "data-id": m.id }, el("b", {}, m.role));
    if (typeof m.content === "string" && m.content !== "") item.append(el("p", { class: "part text" }, m.content));
    for (const call of m.toolCalls ?? []) item.append(renderCall(call, results));
    list.append(item);
  }
  const input = el("textarea", { id: "input" }) as HTMLTextAreaElement;
  const send = el("button", { id: "send", type: "submit" }, "Send") as HTMLButtonElement;
  send.disabled = status !== "ready";
  const form = el("form", { id: "composer" }, input, send);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    if (!input.value) return;
    agent.addMessage({ id: nextId("user"), role: "user", content: input.value });
    void run();
  });
  const old = document.getElementById("composer")?.querySelector("textarea")?.value ?? "";
  input.value = old;
  document.getElementById("root")!.replaceChildren(
    el("h1", {}, `HttpAgent · agent ${agentId} · thread ${thread}`),
    el("div", { id: "status", "data-status": status }, status),
    ...(errors.length ? [el("div", { id: "error" }, errors.join("\n"))] : []),
    list,
    form,
  );
  publish({ page: "httpagent", thread, agent: agentId, status, errors, messages, historyStatus: history.status });
}

render();
