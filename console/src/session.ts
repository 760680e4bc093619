// One session: its committed history as a person reads it (from the AI SDK history route, which
// carries each gate's decision), its runs as a timeline, the calls waiting on a person with their
// buttons, its state, stop and delete, and each run's trace as a timeline (timeline.ts). While a run streams the view follows it live through the
// rejoin stream (text as it is written), and re-reads the committed history when the stream ends;
// otherwise (or when the stream is refused) it re-reads every two seconds and redraws only what changed.
// A thread that branched (a regenerate, an edit: docs/branches.md) shows, where its conversation went
// more than one way, a "‹ 2 / 3 ›" navigator that reads the other branches through the history route's
// `?branch=N` (the branch read is in the page's address: #/sessions/{id}?branch=N), and lists its
// branches; every message has a "Fork from here" action (POST /v1/threads/{id}/fork) that opens the new
// thread.

import { ApiError, call, get, readHistory } from "./api";
import { agents, clientTools } from "./agents";
import { anchorOf, type BranchInfo, branchFor, forkPoints, lastMessageOf } from "./branches";
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

/** The branch the page's address asks for (#/sessions/{id}?branch=N), or null. */
function branchInAddress(): number | null {
  const value = new URLSearchParams(location.hash.split("?")[1] ?? "").get("branch");
  return value !== null && /^\d+$/.test(value) ? Number(value) : null;
}

/** The ids of a path's messages one by one (the AG-UI history: one item per committed message). */
async function messageIds(threadId: string, branch: number | null): Promise<string[]> {
  return (await readHistory("ag-ui", threadId, branch)).filter((m) => m.role !== "reasoning").map((m) => m.id);
}

export async function sessionPage(view: HTMLElement, threadId: string, signal: AbortSignal): Promise<void> {
  const { agents: list } = await agents();
  const header = h("div", { class: "session-head" });
  const notice = h("div", { class: "notice", role: "status", "aria-live": "polite" });
  const pendingBox = h("section", { id: "pending" });
  const history = h("section", { id: "history" });
  const runs = h("section", { id: "runs" });
  const branchList = h("section", { id: "branches" });
  const state = h("section", { id: "state" });
  const trace = h("section", { id: "timeline" });
  view.replaceChildren(header, notice, pendingBox,
    h("div", { class: "session-grid" }, h("div", {}, h("h2", {}, "Conversation"), history),
      h("div", {}, h("h2", {}, "Runs"), runs, branchList, h("h2", {}, "State"), state)),
    h("h2", {}, "Timeline"), trace);
  view.dataset.thread = threadId;

  let last = "";
  let busy = false;
  let confirming = false;
  let detail: any = null;
  let items: any[] = [];
  // the branch read (null: the active one, whichever it is) and, for a thread that branched, the ids of
  // that path's messages one by one (where a fork point sits inside an assistant turn)
  let viewing: number | null = branchInAddress();
  let ledgerIds: string[] | null = null;
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

  const branches = (): BranchInfo[] => detail?.branches ?? [];
  const activeBranch = (): number => detail?.activeBranch ?? 0;
  /** The branch the conversation shown is on. */
  const shownBranch = (): number => viewing ?? activeBranch();
  const onActive = (): boolean => shownBranch() === activeBranch();

  /** Read branch ``branch`` (the active one: follow it, whichever it becomes). */
  function show(branch: number): void {
    viewing = branch === activeBranch() ? null : branch;
    const base = location.hash.split("?")[0];
    window.history.replaceState(null, "", viewing === null ? base : `${base}?branch=${viewing}`);
    last = "";
    void refresh();
  }

  function navigator(point: ReturnType<typeof forkPoints>[number]): HTMLElement {
    const at = point.alternatives.indexOf(point.current);
    const go = (to: number) => show(branchFor(branches(), activeBranch(), point.alternatives[to], point.forkSeq));
    return h("div", { class: "branch-nav", role: "group", "aria-label": "alternatives here",
                      "data-fork-seq": point.forkSeq, "data-current": point.current,
                      "data-alternatives": point.alternatives.join(",") },
      h("button", { class: "branch-prev", type: "button", "aria-label": "previous alternative", disabled: at <= 0 || busy,
                    onclick: () => go(at - 1) }, "‹"),
      h("span", { class: "branch-count" }, `${at + 1} / ${point.alternatives.length}`),
      h("button", { class: "branch-next", type: "button", "aria-label": "next alternative",
                    disabled: at >= point.alternatives.length - 1 || busy, onclick: () => go(at + 1) }, "›"));
  }

  /** Start a new thread holding this path up to and including the UIMessage ``m`` (an assistant turn:
   * all of it), and open it. */
  function fork(m: any): Promise<void> {
    return act(async () => {
      const messageId = m.role === "assistant"
        ? lastMessageOf(m.id, items, ledgerIds ?? await messageIds(threadId, viewing)) : m.id;
      const body: Record<string, unknown> = { messageId };
      if (!onActive()) body.branch = shownBranch();
      const made = await call("POST", `/v1/threads/${encodeURIComponent(threadId)}/fork`, body);
      location.hash = `#/sessions/${encodeURIComponent(made.threadId)}`;
    }, "Forked.");
  }

  function drawHistory(): void {
    const streaming = !onActive() ? [] : [...live].filter(([id]) => !items.some((m) => m.id === id))
      .map(([id, m]) => ({ id, role: m.role, parts: [{ type: "text", text: m.text, state: "streaming" }] }));
    const open = new Set([...history.querySelectorAll("details[open]")].map((d) => d.closest("[data-id]")?.getAttribute("data-id")));
    const ol = uiMessages([...items, ...streaming], clientTools(list, detail.agentId));
    const rows = [...ol.children] as HTMLElement[];
    // under each committed message: the alternatives that start there, and "fork from here"
    const feet = rows.map((row, i) => i < items.length
      ? h("div", { class: "message-foot" }, h("button", { class: "fork", type: "button", disabled: busy,
        title: "Start a new thread with the conversation up to here", onclick: () => fork(items[i]) }, "Fork from here"))
      : null);
    for (const point of forkPoints(branches(), shownBranch())) {
      const at = anchorOf(point, items, ledgerIds);
      if (at < items.length) feet[at]?.prepend(navigator(point));
      else ol.append(h("li", { class: "message branch-end", "data-role": "none" }, h("div", { class: "message-foot" },
        navigator(point), h("span", { class: "muted" }, "nothing here on this branch yet"))));
    }
    rows.forEach((row, i) => { if (feet[i]) row.append(feet[i] as HTMLElement); });
    history.replaceChildren(ol);
    for (const d of history.querySelectorAll("details")) {
      if (open.has(d.closest("[data-id]")?.getAttribute("data-id"))) d.setAttribute("open", "");
    }
    history.dataset.live = streaming.length ? "true" : "false";
    history.dataset.branch = String(shownBranch());
  }

  function drawBranches(): void {
    const all = branches();
    if (all.length < 2) {
      branchList.replaceChildren();
      return;
    }
    branchList.replaceChildren(h("h2", {}, "Branches"),
      h("ul", { class: "branch-list" }, all.map((b) => h("li", { "data-branch": b.branch,
        "data-active": b.branch === activeBranch() ? "true" : "false", "data-shown": b.branch === shownBranch() ? "true" : "false" },
        h("button", { class: "show-branch", type: "button", disabled: b.branch === shownBranch(), onclick: () => show(b.branch) },
          `Branch ${b.branch}`),
        b.branch === activeBranch() ? h("span", { class: "badge status-running" }, "active") : null,
        h("span", { class: "muted" }, b.parent === null ? " the conversation as it began"
          : [` ${b.reason === "edit" ? "an edited message" : b.reason === "regenerate" ? "a new answer" : b.reason}, `,
            ...(b.forkSeq === 0 ? ["from the start"] : ["after ", h("code", { class: "id" }, b.forkMessageId ?? "")]),
            ` · ${time(b.createdAt)}`],
          b.messageCount === undefined ? null : ` · ${b.messageCount} messages`)))));
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
    if (!signal.aborted && detail && onActive()) drawHistory();
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
        h("span", { class: "muted" }, `agent ${detail.agentId ?? "?"} · ${detail.messageCount} messages · updated ${time(detail.updatedAt)}`),
        branches().length > 1 ? h("span", { class: "badge", id: "session-branch", "data-branch": shownBranch() },
          `branch ${shownBranch()} of ${branches().length}`) : null),
      onActive() ? null : h("p", { class: "branch-note", id: "branch-note" },
        `You are reading branch ${shownBranch()}; the conversation continues on branch ${activeBranch()}. `,
        h("button", { id: "show-active", type: "button", onclick: () => show(activeBranch()) }, "Show the active branch")),
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
    pendingBox.replaceChildren(...(detail.pending.length === 0 || !onActive() ? [] : [
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
    drawBranches();
    runs.replaceChildren(detail.runs.length ? runsTable(detail.runs) : h("p", { class: "muted" }, "No runs."));
    state.replaceChildren(h("pre", { class: "value state" }, json(detail.state ?? {})));
    trace.replaceChildren(timelines(detail.runs));
  }

  // refreshes overlap (the timer's, an action's, a run's end): only an answer newer than the one drawn is
  // drawn, so a slow answer read before a change never paints over the change
  let asked = 0;
  let drawn = 0;

  async function refresh(): Promise<void> {
    const want = viewing;
    const ticket = ++asked;
    try {
      const [d, messages] = await Promise.all([
        get(`/v1/threads/${encodeURIComponent(threadId)}`), readHistory("ai-sdk", threadId, want)]);
      // a thread that branched: where its fork points sit when one is inside an assistant turn
      const ids = (d.branches ?? []).length > 1 ? await messageIds(threadId, want) : null;
      if (signal.aborted || want !== viewing || ticket < drawn) return;
      drawn = ticket;
      const key = JSON.stringify([d, messages, ids]);
      if (key === last) return;
      last = key;
      detail = d;
      items = messages;
      ledgerIds = ids;
      view.dataset.loaded = "true";
      draw();
      if (d.runs.at(-1)?.status === "running" && !following && !streamRefused && Date.now() >= followAfter) {
        void follow();
      }
    } catch (err) {
      if (signal.aborted || want !== viewing) return;
      if (err instanceof ApiError && err.status === 400 && want !== null) {
        notice.textContent = `${err.code}: ${err.message} Showing the active branch.`; // a branch this thread does not have
        show(detail?.activeBranch ?? 0);
        return;
      }
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
