// Talking to the server: the bearer token (kept in sessionStorage), JSON GETs with classified
// failures, and the paged reads (thread listing, history). Every screen reads through here, so a
// 401 always asks for a token and a 503 always shows the banner.

const TOKEN_KEY = "awaken.console.token";

export class ApiError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }
}

type Listener = (event: { kind: "unauthorized" | "unavailable" | "ok"; error?: ApiError }) => void;
const listeners: Listener[] = [];
export function onApiEvent(listener: Listener): void {
  listeners.push(listener);
}
function emit(kind: "unauthorized" | "unavailable" | "ok", error?: ApiError): void {
  for (const l of listeners) l({ kind, error });
}

export function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}
export function setToken(value: string | null): void {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}
export function authHeaders(): Record<string, string> {
  const t = token();
  return t ? { Authorization: `Bearer ${t}` } : {};
}

/** The server's origin as a ws:// or wss:// URL prefix. */
export function wsBase(): string {
  return `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}`;
}
export function wsProtocols(): string[] {
  const t = token();
  return t ? ["awaken.v1", `bearer.${t}`] : ["awaken.v1"];
}

/** One request; a non-2xx answer becomes an ApiError with the server's code and message. */
export async function call(method: string, path: string, body?: unknown): Promise<any> {
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers: { ...authHeaders(), ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch (err) {
    const error = new ApiError(0, "NETWORK", `The server could not be reached (${String(err)}).`);
    emit("unavailable", error);
    throw error;
  }
  if (response.ok) {
    emit("ok");
    if (response.status === 204) return null;
    return response.json();
  }
  let code = `HTTP_${response.status}`;
  let message = response.statusText || `HTTP ${response.status}`;
  try {
    const payload = await response.json();
    if (payload?.error) ({ code, message } = payload.error);
  } catch {
    // not JSON: keep the status line
  }
  const error = new ApiError(response.status, code, message);
  if (response.status === 401) emit("unauthorized", error);
  else if (response.status === 503 || response.status === 502 || response.status === 504) emit("unavailable", error);
  throw error;
}

export const get = (path: string) => call("GET", path);

export type ThreadSummary = {
  threadId: string;
  title: string;
  agentId: string | null;
  createdAt: number;
  updatedAt: number;
  messageCount: number;
  lastRun: { runId: string; status: string; cause: string | null; errorCode: string | null } | null;
  waiting: boolean;
};

export type Page<T> = { items: T[]; cursor: string | null };

export function threadsPage(cursor: string | null, limit: number, agent: string): Promise<Page<ThreadSummary>> {
  const q = new URLSearchParams({ limit: String(limit) });
  if (cursor) q.set("cursor", cursor);
  if (agent) q.set("agent", agent);
  return get(`/v1/threads?${q}`);
}

/** A thread's whole committed history at a protocol's history route, page by page: the active path,
 * or the path of ``branch`` (`?branch=N`, docs/branches.md). */
export async function readHistory(protocol: "ai-sdk" | "ag-ui", threadId: string, branch: number | null = null): Promise<any[]> {
  const items: any[] = [];
  let cursor = "";
  for (let page = 0; page < 10000; page++) {
    const q = new URLSearchParams({ limit: "100" });
    if (cursor) q.set("cursor", cursor);
    if (branch !== null) q.set("branch", String(branch));
    const body = await get(`/v1/${protocol}/threads/${encodeURIComponent(threadId)}/messages?${q}`);
    if (body.items.length === 0) break;
    for (const item of body.items) {
      const at = items.findIndex((m) => m.id === item.id); // a page may re-send a message whole
      if (at >= 0) items[at] = item;
      else items.push(item);
    }
    cursor = body.cursor;
  }
  return items;
}
