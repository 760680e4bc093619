// Following a thread's active run as it streams: the AG-UI rejoin route
// (GET /v1/ag-ui/threads/{threadId}/stream) read with fetch, the bearer token when there is one, and a
// small SSE reader. It only reports events; the session view decides what to show, and re-reads the
// committed history once the stream ends.

import { authHeaders } from "./api";

/** How following ended: the run's stream ran to its end, nothing ran (204), or the server (or the
 * network) refused the stream, so the caller falls back to polling. */
export type Followed = "ended" | "idle" | "refused";

/** The data of each SSE event in ``body``, in order (``id:``, ``event:`` and comment lines ignored). */
export async function* sseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      const lines = buffer.split(/\r\n|\r|\n/);
      buffer = lines.pop() ?? "";
      for (const line of lines) {
        if (line === "") {
          if (data.length) yield data.join("\n");
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
        }
      }
    }
    if (data.length) yield data.join("\n");
  } finally {
    reader.releaseLock();
  }
}

/** Read the active run of ``threadId`` from its start, handing each AG-UI event to ``onEvent``. */
export async function followRun(threadId: string, signal: AbortSignal, onEvent: (event: any) => void): Promise<Followed> {
  let response: Response;
  try {
    response = await fetch(`/v1/ag-ui/threads/${encodeURIComponent(threadId)}/stream`, {
      headers: { ...authHeaders(), accept: "text/event-stream" }, cache: "no-store", signal });
  } catch {
    return "refused";
  }
  if (response.status === 204) return "idle";
  if (!response.ok || !response.body) return "refused";
  try {
    for await (const data of sseData(response.body)) {
      if (data === "[DONE]") continue;
      let event: any;
      try {
        event = JSON.parse(data);
      } catch {
        continue; // not an event this view reads
      }
      onEvent(event);
    }
  } catch {
    return signal.aborted ? "ended" : "refused";
  }
  return "ended";
}
