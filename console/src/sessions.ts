// The sessions list: every thread the caller may see, newest first, paged, filtered by agent and
// status, searched by id and title, refreshed every few seconds. An empty list is only ever shown
// after the server said so; a failure shows the error instead.

import { ApiError, threadsPage, type ThreadSummary } from "./api";
import { agents } from "./agents";
import { h, time } from "./dom";

const PAGE = 25;
const REFRESH_MS = 2000;

export function statusOf(t: ThreadSummary): string {
  if (t.waiting) return "waiting";
  return t.lastRun?.status ?? "empty";
}

const STATUS_FILTER: Record<string, (t: ThreadSummary) => boolean> = {
  "": () => true,
  running: (t) => statusOf(t) === "running",
  waiting: (t) => t.waiting,
  failed: (t) => t.lastRun?.status === "failed",
};

type Query = { agent: string; status: string; search: string };

function matches(t: ThreadSummary, q: Query): boolean {
  const needle = q.search.trim().toLowerCase();
  return STATUS_FILTER[q.status](t) &&
    (!needle || t.threadId.toLowerCase().includes(needle) || t.title.toLowerCase().includes(needle));
}

/** Read pages until `want` matching threads (or the end); the cursor to go on from. */
async function collect(q: Query, want: number): Promise<{ items: ThreadSummary[]; cursor: string | null; end: boolean }> {
  const items: ThreadSummary[] = [];
  let cursor: string | null = null;
  for (;;) {
    const page = await threadsPage(cursor, PAGE, q.agent);
    items.push(...page.items.filter((t) => matches(t, q)));
    if (page.items.length < PAGE || !page.cursor) return { items, cursor: null, end: true };
    cursor = page.cursor;
    if (items.length >= want) return { items, cursor, end: false };
  }
}

export async function sessionsPage(view: HTMLElement, signal: AbortSignal): Promise<void> {
  const q: Query = { agent: "", status: "", search: "" };
  let want = PAGE;
  const { agents: list } = await agents();
  const agentSelect = h("select", { id: "filter-agent", "aria-label": "agent" },
    h("option", { value: "" }, "All agents"), list.map((a) => h("option", { value: a.id }, a.id)));
  const statusSelect = h("select", { id: "filter-status", "aria-label": "status" },
    h("option", { value: "" }, "Any status"), h("option", { value: "running" }, "Running"),
    h("option", { value: "waiting" }, "Waiting on a person"), h("option", { value: "failed" }, "Failed"));
  const search = h("input", { id: "search", type: "search", placeholder: "Search id or title", "aria-label": "search" });
  const body = h("div", { id: "sessions", "data-loaded": "false" }, h("p", { class: "muted loading" }, "Loading sessions…"));
  const more = h("button", { id: "more", type: "button", hidden: true }, "Load more");
  view.replaceChildren(h("h1", {}, "Sessions"),
    h("div", { class: "filters" }, agentSelect, statusSelect, search), body, more);

  let generation = 0;
  let shown = ""; // what the list shows now: a refresh that changes nothing leaves the page (and the focus) alone
  async function load(): Promise<void> {
    const mine = ++generation;
    try {
      const { items, end } = await collect(q, want);
      if (mine !== generation || signal.aborted) return;
      more.hidden = end;
      const key = JSON.stringify(items);
      if (key === shown && body.dataset.loaded === "true") return;
      shown = key;
      const focused = (document.activeElement as HTMLElement | null)?.closest<HTMLElement>("tr.session")?.dataset.thread;
      body.dataset.loaded = "true";
      if (items.length === 0) {
        body.replaceChildren(h("p", { class: "muted empty" }, "No sessions match."));
        return;
      }
      body.replaceChildren(h("table", { class: "sessions" },
        h("thead", {}, h("tr", {}, h("th", {}, "Session"), h("th", {}, "Agent"), h("th", {}, "Status"),
          h("th", { class: "num" }, "Messages"), h("th", {}, "Updated"))),
        h("tbody", {}, items.map((t) => {
          const status = statusOf(t);
          return h("tr", { class: "session", "data-thread": t.threadId, "data-status": status },
            h("td", {}, h("a", { href: `#/sessions/${encodeURIComponent(t.threadId)}` }, t.title || "(no text)"),
              h("div", { class: "muted id" }, t.threadId)),
            h("td", { class: "agent" }, t.agentId ?? ""),
            h("td", {}, h("span", { class: `badge status-${status}` }, status),
              t.lastRun?.errorCode ? h("div", { class: "muted" }, t.lastRun.errorCode) : null,
              t.lastRun?.cause ? h("div", { class: "muted" }, t.lastRun.cause) : null),
            h("td", { class: "num", "data-label": "messages" }, String(t.messageCount)),
            h("td", { "data-label": "updated" }, time(t.updatedAt)));
        }))));
      if (focused) body.querySelector<HTMLElement>(`tr.session[data-thread="${CSS.escape(focused)}"] a`)?.focus();
    } catch (err) {
      if (mine !== generation || signal.aborted) return;
      shown = "";
      body.dataset.loaded = "error";
      body.replaceChildren(h("p", { class: "error-text" },
        `The sessions could not be listed: ${err instanceof ApiError ? `${err.code}: ${err.message}` : String(err)}`));
    }
  }
  const reload = () => void load();
  agentSelect.addEventListener("change", () => { q.agent = agentSelect.value; want = PAGE; reload(); });
  statusSelect.addEventListener("change", () => { q.status = statusSelect.value; want = PAGE; reload(); });
  search.addEventListener("input", () => { q.search = search.value; want = PAGE; reload(); });
  more.addEventListener("click", () => { want += PAGE; reload(); });
  await load();
  const timer = setInterval(() => { if (!document.hidden) reload(); }, REFRESH_MS);
  signal.addEventListener("abort", () => clearInterval(timer));
}
