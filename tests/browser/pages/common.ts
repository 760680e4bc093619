// What every test page shares: its query parameters, the paged history read, and how it shows
// its state to the runner (window.__state; the DOM shows the same conversation to a person).
//
//   <page>.html?server=http://127.0.0.1:PORT&thread=THREAD_ID&agent=AGENT_ID[&token=BEARER_TOKEN]
//
// With a token, every request the page makes (runs, history, the thread list) carries it as
// `Authorization: Bearer`, the way an app hands its user's token to `useChat` and `HttpAgent`.

export const params = new URLSearchParams(location.search);
export const server = params.get("server") ?? "";
export const thread = params.get("thread") ?? `page-${Date.now()}`;
export const agentId = params.get("agent") ?? "assistant";
export const token = params.get("token");
export const authHeaders: Record<string, string> = token ? { Authorization: `Bearer ${token}` } : {};

export type History = { status: number; items: any[] };

/** The whole committed history of the thread (404: no thread yet), read page by page. */
export async function readHistory(path: string): Promise<History> {
  const items: any[] = [];
  let cursor = "";
  for (let page = 0; page < 1000; page++) {
    const url = `${server}${path}?limit=20${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
    const response = await fetch(url, { headers: authHeaders });
    if (response.status === 404) return { status: 404, items: [] };
    if (!response.ok) throw new Error(`history answered ${response.status}: ${await response.text()}`);
    const body = await response.json();
    if (body.items.length === 0) break;
    for (const item of body.items) {
      const at = items.findIndex((m) => m.id === item.id); // a page may re-send a message whole
      if (at >= 0) items[at] = item;
      else items.push(item);
    }
    cursor = body.cursor;
  }
  return { status: 200, items };
}

/** The caller's threads (`GET /v1/threads`, every page), as the server lists them for this token. */
export async function listThreads(): Promise<{ status: number; ids: string[] }> {
  const ids: string[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < 1000; page++) {
    const url = `${server}/v1/threads?limit=20${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
    const response = await fetch(url, { headers: authHeaders });
    if (!response.ok) return { status: response.status, ids };
    const body = await response.json();
    ids.push(...body.items.map((t: any) => t.threadId));
    cursor = body.cursor;
    if (!cursor) break;
  }
  return { status: 200, ids };
}

declare global {
  interface Window {
    __state: unknown;
    __listThreads: typeof listThreads;
  }
}

window.__listThreads = listThreads;

/** What the runner reads: a plain JSON copy of the page's state. */
export function publish(state: Record<string, unknown>): void {
  window.__state = JSON.parse(JSON.stringify(state));
}
