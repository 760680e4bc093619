// One session: its committed history as a person reads it (from the AI SDK history route, which
// carries each gate's decision), its runs as a timeline, the calls waiting on a person with their
// buttons, its state, stop and delete, and each run's trace as a timeline (timeline.ts). While a run streams the view follows it live through the
// rejoin stream (text as it is written), and re-reads the committed history when the stream ends;
// otherwise (or when the stream is refused) it re-reads every two seconds and redraws only what changed.

import { ApiError, call, get, readHistory } from "./api";
import { agents, clientTools } from "./agents";
import { AiSdkChat } from "./clients";
import { duration, h, json, time } from "./dom";
import { followRun } from "./live";
import { uiMessages } from "./render";
import { timelines } from "./timeline";

const REFRESH_MS = 2000;

function runsTable(runs: any[]): HTMLElement {
  return h("table", { class: "runs" },
    h("thead", {}, h("tr", {}, h("th", {}, "Run"), h("th", {}, "Status"), h("th", { class: "num" }, "Steps"),
      h("th", { class: "num" }, "Tokens in / out"), h("th", { class: "num" }, "Took"))),
    h("tbody", {}, runs.map((r) => h("tr", { class: "run", "data-run": r.runId, "data-status": r.status },
      h("td", {}, h("code", {}, r.runId), h("div", { class: "muted" }, `${r.agentId} · ${time(r.createdAt)}`)),
      h("td", {}, h("span", { class: `badge status-${r.status}` }, r.status),
        r.cause ? h("div", { class: "cause muted" }, `cause: ${r.cause}`) : null,
        r.error ? h("div", { class: "run-error error-text" }, `${r.error.code}: ${r.error.message ?? ""}`) : null),
      h("td", { class: "num", "data-label": "steps" }, String(r.steps)),
      h("td", { class: "num", "data-label": "tokens in / out" }, `${r.usage.inputTokens} / ${r.usage.outputTokens}`),
      h("td", { class: "num", "data-label": "took" }, duration(Math.max(0, r.updatedAt - r.createdAt)))))));
}

export async function sessionPage(view: HTMLElement, threadId: string, signal: AbortSignal): Promise<void> {
  const { agents: list } = await agents();
  const header = h("div", { class: "session-head" });
  const notice = h("div", { class: "notice", role: "status", "aria-live": "polite" });
  const pendingBox = h("section", { id: "pending" });
  const history = h("section", { id: "history" });
  const runs = h("section", { id: "runs" });
  const state = h("section", { id: "state" });
  const trace = h("section", { id: "timeline" });
  view.replaceChildren(header, notice, pendingBox,
    h("div", { class: "session-grid" }, h("div", {}, h("h2", {}, "Conversation"), history),
      h("div", {}, h("h2", {}, "Runs"), runs, h("h2", {}, "State"), state)),
    h("h2", {}, "Timeline"), trace);
  view.dataset.thread = threadId;

  let last = "";
  let busy = false;
  let confirming = false;
  let detail: any = null;
  let items: any[] = [];
  // the active run's text as it streams, by message id (shown after the committed history)
  const live = new Map<string, { role: string; text: string }>();
  let following = false;
  let streamRefused = false;
  let followAfter = 0;

  async function act(work: () => Promise<unknown>, done: string): Promise<void> {
    busy = true;
    draw();
    try {
      await work();
      notice.textContent = done;
    } catch (err) {
      notice.textContent = err instanceof ApiError ? `${err.code}: ${err.message}` : String(err);
    } finally {
      busy = false;
      last = "";
      await refresh();
    }
  }

  function chat(): AiSdkChat {
    return new AiSdkChat(threadId, detail.agentId ?? list[0]?.id, "sse", structuredClone(items), () => undefined);
  }

  // Decisions wait here until every pending call has one, then go in one request (as a client sends them).
  const decided = new Map<string, (c: AiSdkChat) => Promise<void>>();

  async function settle(toolCallId: string, apply: (c: AiSdkChat) => Promise<void>): Promise<void> {
    decided.set(toolCallId, apply);
    if (!detail.pending.every((p: any) => decided.has(p.toolCallId))) {
      draw();
      return;
    }
    const c = chat();
    const all = [...decided.values()];
    decided.clear();
    for (const next of all) await next(c);
    if (c.error) throw c.error;
  }

  function decide(toolCallId: string, approved: boolean, reason: string): Promise<void> {
    const part = items.flatMap((m) => m.parts ?? []).find((p: any) => p.toolCallId === toolCallId);
    return settle(toolCallId, (c) => c.decide(part.approval.id, approved, reason));
  }

  function answer(tool: string, toolCallId: string, text: string): Promise<void> {
    return settle(toolCallId, (c) => c.answer(tool, toolCallId, text));
  }

  function drawHistory(): void {
    const streaming = [...live].filter(([id]) => !items.some((m) => m.id === id))
      .map(([id, m]) => ({ id, role: m.role, parts: [{ type: "text", text: m.text, state: "streaming" }] }));
    const open = new Set([...history.querySelectorAll("details[open]")].map((d) => d.closest("[data-id]")?.getAttribute("data-id")));
    history.replaceChildren(uiMessages([...items, ...streaming], clientTools(list, detail.agentId)));
    for (const d of history.querySelectorAll("details")) {
      if (open.has(d.closest("[data-id]")?.getAttribute("data-id"))) d.setAttribute("open", "");
    }
    history.dataset.live = streaming.length ? "true" : "false";
  }

  function onRunEvent(event: any): void {
    if (event.type === "TEXT_MESSAGE_START") {
      live.set(event.messageId, { role: event.role ?? "assistant", text: "" });
    } else if (event.type === "TEXT_MESSAGE_CONTENT" || event.type === "TEXT_MESSAGE_CHUNK") {
      const m = live.get(event.messageId) ?? { role: event.role ?? "assistant", text: "" };
      m.text += event.delta ?? "";
      live.set(event.messageId, m);
    } else {
      return;
    }
    if (!signal.aborted && detail) drawHistory();
  }

  // Follow the active run until its stream ends, then read what it committed.
  async function follow(): Promise<void> {
    following = true;
    let outcome;
    try {
      outcome = await followRun(threadId, signal, onRunEvent);
    } finally {
      following = false;
      live.clear();
    }
    if (signal.aborted) return;
    if (outcome === "refused") streamRefused = true; // poll from here on
    else if (outcome === "idle") followAfter = Date.now() + REFRESH_MS; // nothing ran yet: poll, then try again
    last = "";
    await refresh();
  }

  function draw(): void {
    const status = detail.waiting ? "waiting" : detail.runs.at(-1)?.status ?? "empty";
    const running = status === "running";
    header.replaceChildren(
      h("h1", {}, detail.title || "(no text)"),
      h("div", { class: "meta" }, h("code", { class: "id" }, detail.threadId),
        h("span", { class: `badge status-${status}`, id: "session-status", "data-status": status }, status),
        h("span", { class: "muted" }, `agent ${detail.agentId ?? "?"} · ${detail.messageCount} messages · updated ${time(detail.updatedAt)}`)),
      h("div", { class: "toolbar" },
        h("button", { id: "stop", type: "button", disabled: !running || busy, onclick: () => act(
          () => call("POST", `/v1/threads/${encodeURIComponent(threadId)}/stop`), "Stopped.") }, "Stop run"),
        confirming
          ? h("span", { class: "confirm", role: "group", "aria-label": "confirm delete" },
            "Delete this session and its whole history? ",
            h("button", { id: "confirm-delete", class: "danger", type: "button", onclick: () => {
              confirming = false;
              void act(async () => {
                await call("DELETE", `/v1/threads/${encodeURIComponent(threadId)}`);
                location.hash = "#/sessions";
              }, "Deleted.");
            } }, "Delete for good"),
            h("button", { id: "cancel-delete", type: "button", onclick: () => { confirming = false; draw(); } }, "Keep it"))
          : h("button", { id: "delete", class: "danger", type: "button", disabled: running || busy,
            onclick: () => { confirming = true; draw(); (document.getElementById("confirm-delete") as HTMLElement)?.focus(); } },
          "Delete…")));
    pendingBox.replaceChildren(...(detail.pending.length === 0 ? [] : [
      h("h2", {}, "Waiting on a person"),
      h("ul", { class: "pending" }, detail.pending.map((p: any) => {
        if (decided.has(p.toolCallId)) {
          return h("li", { class: "pending-call", "data-call": p.toolCallId, "data-kind": p.kind, "data-decided": "true" },
            h("code", {}, `${p.name}(${p.arguments})`), h("span", { class: "muted" }, " decided; sent once every call here has an answer"));
        }
        const reason = h("input", { class: "reason", placeholder: "reason (optional)", "aria-label": "reason for a denial" });
        const text = h("input", { class: "answer-text", placeholder: "your answer", "aria-label": `answer to ${p.name}` });
        return h("li", { class: "pending-call", "data-call": p.toolCallId, "data-kind": p.kind },
          h("code", {}, `${p.name}(${p.arguments})`),
          p.kind === "approval"
            ? h("span", { class: "actions" },
              h("button", { class: "approve", type: "button", disabled: busy,
                onclick: () => act(() => decide(p.toolCallId, true, ""), "Approved.") }, "Approve"),
              h("button", { class: "deny danger", type: "button", disabled: busy,
                onclick: () => act(() => decide(p.toolCallId, false, reason.value), "Denied.") }, "Deny"), reason)
            : h("span", { class: "actions" }, text,
              h("button", { class: "answer", type: "button", disabled: busy,
                onclick: () => act(() => answer(p.name, p.toolCallId, text.value), "Answered.") }, "Answer")));
      })),
    ]));
    drawHistory();
    runs.replaceChildren(detail.runs.length ? runsTable(detail.runs) : h("p", { class: "muted" }, "No runs."));
    state.replaceChildren(h("pre", { class: "value state" }, json(detail.state ?? {})));
    trace.replaceChildren(timelines(detail.runs));
  }

  async function refresh(): Promise<void> {
    try {
      const [d, messages] = await Promise.all([
        get(`/v1/threads/${encodeURIComponent(threadId)}`), readHistory("ai-sdk", threadId)]);
      if (signal.aborted) return;
      const key = JSON.stringify([d, messages]);
      if (key === last) return;
      last = key;
      detail = d;
      items = messages;
      view.dataset.loaded = "true";
      draw();
      if (d.runs.at(-1)?.status === "running" && !following && !streamRefused && Date.now() >= followAfter) {
        void follow();
      }
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof ApiError && err.status === 404) {
        view.dataset.loaded = "missing";
        view.replaceChildren(h("h1", {}, "No such session"),
          h("p", {}, `Nothing is committed on thread ${threadId} (or it is not yours).`),
          h("a", { href: "#/sessions" }, "All sessions"));
        return;
      }
      notice.textContent = err instanceof ApiError ? `${err.code}: ${err.message}` : String(err);
    }
  }

  await refresh();
  const timer = setInterval(() => { if (!busy && !following && !document.hidden) void refresh(); }, REFRESH_MS);
  signal.addEventListener("abort", () => clearInterval(timer));
}
