// Rejoining a run after a reload or a dropped connection (issue 16), from another origin.
//
//   resume.html?server=…&thread=…&agent=…&mode=usechat&send=TEXT
//     useChat({ resume: true }) (AI SDK v6, @ai-sdk/react): on mount it reads the thread's history and
//     calls GET {api}/{chatId}/stream (DefaultChatTransport.reconnectToStream). With `send`, the page
//     sends TEXT once, when the history is empty (the first load, not the reload).
//   resume.html?server=…&thread=…&agent=…&mode=fetch&send=TEXT
//     A fetch-based AG-UI client: POSTs a run saying TEXT, reads SSE frames up to the first
//     TEXT_MESSAGE_CONTENT (a held run streams its first word, then holds), aborts (a dropped
//     connection), then rejoins GET /v1/ag-ui/threads/{id}/stream with Last-Event-ID set to the last
//     frame's id (a header that needs the CORS preflight) and reads to RUN_FINISHED.
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, type UIMessage } from "ai";
import { useEffect, useMemo, useRef } from "react";
import { createRoot } from "react-dom/client";

import { agentId, params, publish, readHistory, server, thread } from "./common";

const mode = params.get("mode") ?? "usechat";
const toSend = params.get("send") ?? "";

function Chat({ initial, historyStatus }: { initial: UIMessage[]; historyStatus: number }) {
  const api = `${server}/v1/ai-sdk/agents/${encodeURIComponent(agentId)}/chat`;
  const transport = useMemo(() => new DefaultChatTransport({ api }), []);
  const { messages, sendMessage, status, error } = useChat({ id: thread, messages: initial, transport, resume: true });
  const sent = useRef(false);
  useEffect(() => {
    if (toSend && initial.length === 0 && !sent.current) {
      sent.current = true;
      void sendMessage({ text: toSend });
    }
  }, []);
  useEffect(() => {
    publish({ page: "resume", mode, thread, status, error: error?.message ?? null, messages, historyStatus });
  }, [status, error, messages, historyStatus]);
  return (
    <main>
      <h1>useChat resume · agent {agentId} · thread {thread}</h1>
      <div id="status" data-status={status}>{status}</div>
      {error && <div id="error">{error.message}</div>}
      <ol id="messages">
        {messages.map((m) => (
          <li key={m.id} className="message" data-role={m.role} data-id={m.id}>
            <b>{m.role}</b>
            {m.parts.map((p: any, i) => (p.type === "text" ? <p key={i} className="part text">{p.text}</p> : null))}
          </li>
        ))}
      </ol>
    </main>
  );
}

type Frame = { id: string | null; event: any };

/** Read SSE frames from `response` until `stop(frames)` or the end of the body. */
async function readFrames(response: Response, into: Frame[], stop: (frames: Frame[]) => boolean): Promise<void> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let at: number;
    while ((at = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, at);
      buffer = buffer.slice(at + 2);
      let id: string | null = null;
      let data: string | null = null;
      for (const line of block.split("\n")) {
        if (line.startsWith("id: ")) id = line.slice(4);
        else if (line.startsWith("data: ")) data = line.slice(6);
      }
      if (data === null) continue;
      into.push({ id, event: JSON.parse(data) });
      if (stop(into)) {
        await reader.cancel();
        return;
      }
    }
  }
}

async function fetchClient(): Promise<void> {
  const state: Record<string, unknown> = { page: "resume", mode, thread, phase: "posting", first: [], rejoined: [] };
  const show = () => {
    publish(state);
    document.getElementById("root")!.textContent = JSON.stringify(state, null, 1);
  };
  show();
  const body = {
    threadId: thread, runId: `run-${thread}`, state: {}, tools: [], context: [], forwardedProps: {},
    messages: [{ id: `u-${thread}`, role: "user", content: toSend }],
  };
  const abort = new AbortController();
  const posted = await fetch(`${server}/v1/ag-ui/agents/${encodeURIComponent(agentId)}`, {
    method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify(body), signal: abort.signal,
  });
  const first: Frame[] = [];
  await readFrames(posted, first, (frames) => frames.at(-1)!.event.type === "TEXT_MESSAGE_CONTENT");
  abort.abort();
  state.first = first;
  state.phase = "dropped";
  show();
  const lastId = first.at(-1)!.id!;
  const rejoin = await fetch(`${server}/v1/ag-ui/threads/${encodeURIComponent(thread)}/stream`, {
    headers: { accept: "text/event-stream", "last-event-id": lastId },
  });
  state.rejoinStatus = rejoin.status;
  state.phase = "rejoined";
  show();
  const rejoined: Frame[] = [];
  await readFrames(rejoin, rejoined, (frames) => frames.at(-1)!.event.type === "RUN_FINISHED");
  state.rejoined = rejoined;
  state.phase = "done";
  show();
}

async function main() {
  if (mode === "fetch") return fetchClient();
  const history = await readHistory(`/v1/ai-sdk/threads/${encodeURIComponent(thread)}/messages`);
  createRoot(document.getElementById("root")!).render(<Chat initial={history.items} historyStatus={history.status} />);
}

main().catch((err) => {
  publish({ page: "resume", fatal: String(err) });
  document.body.textContent = `fatal: ${err}`;
});
