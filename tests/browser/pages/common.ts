// What every test page shares: its query parameters, the paged history read, and how it shows
// its state to the runner (window.__state; the DOM shows the same conversation to a person).
//
//   <page>.html?server=http://127.0.0.1:PORT&thread=THREAD_ID&agent=AGENT_ID

export const params = new URLSearchParams(location.search);
export const server = params.get("server") ?? "";
export const thread = params.get("thread") ?? `page-${Date.now()}`;
export const agentId = params.get("agent") ?? "assistant";

export type History = { status: number; items: any[] };

/** The whole committed history of the thread (404: no thread yet), read page by page. */
export async function readHistory(path: string): Promise<History> {
  const items: any[] = [];
  let cursor = "";
  for (let page = 0; page < 1000; page++) {
    const url = `${server}${path}?limit=20${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
    const response = await fetch(url);
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

declare global {
  interface Window {
    __state: unknown;
  }
}

/** What the runner reads: a plain JSON copy of the page's state. */
export function publish(state: Record<string, unknown>): void {
  window.__state = JSON.parse(JSON.stringify(state));
}
