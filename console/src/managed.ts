// The Managed Agents wire in the chat: a session (POST /v1/sessions) is the chat's thread, a send is
// POST /v1/sessions/{id}/events, and one long-lived stream (GET …/events/stream?event_deltas=agent.message,
// resumed with Last-Event-ID when it drops) feeds the transcript. The session's events are kept as AG-UI
// shaped messages, so the chat renders them as it renders AG-UI's: user and assistant text, tool calls
// with their results, gates and client tools waiting for an answer.

import { authHeaders, call } from "./api";

type Listener = () => void;

export class ManagedChat {
  messages: any[] = [];
  status: "ready" | "streaming" | "error" = "ready";
  error = "";
  sessionId: string | null = null;
  private lastEventId: string | null = null;
  private readonly abort = new AbortController();
  private streaming = false;

  constructor(private readonly agent: string, private readonly changed: Listener) {}

  close(): void {
    this.abort.abort();
  }

  /** Send events, creating the session (and opening its stream) on the first send. */
  async send(events: unknown[]): Promise<void> {
    this.error = "";
    try {
      if (!this.sessionId) {
        const session = await call("POST", "/v1/sessions", { agent: this.agent, environment_id: "console" });
        this.sessionId = session.id;
      }
      this.status = "streaming";
      this.changed();
      if (!this.streaming) void this.follow();
      await call("POST", `/v1/sessions/${encodeURIComponent(this.sessionId!)}/events`, { events });
    } catch (err) {
      this.status = "error";
      this.error = String((err as Error).message ?? err);
      this.changed();
    }
  }

  sendText(text: string): Promise<void> {
    return this.send([{ type: "user.message", content: [{ type: "text", text }] }]);
  }

  decide(toolUseId: string, approved: boolean, reason: string): Promise<void> {
    return this.send([approved ? { type: "user.tool_confirmation", tool_use_id: toolUseId, result: "allow" }
      : { type: "user.tool_confirmation", tool_use_id: toolUseId, result: "deny", deny_message: reason || "denied by a person" }]);
  }

  answer(toolUseId: string, text: string): Promise<void> {
    return this.send([{ type: "user.custom_tool_result", custom_tool_use_id: toolUseId,
                        content: [{ type: "text", text: JSON.stringify({ answer: text }) }] }]);
  }

  /** Read the session's stream for as long as the chat is open, resuming after the last event seen. */
  private async follow(): Promise<void> {
    this.streaming = true;
    while (!this.abort.signal.aborted && this.sessionId) {
      try {
        const headers: Record<string, string> = { ...authHeaders(), Accept: "text/event-stream" };
        if (this.lastEventId) headers["Last-Event-ID"] = this.lastEventId;
        const response = await fetch(`/v1/sessions/${encodeURIComponent(this.sessionId)}/events/stream?event_deltas=agent.message`,
          { headers, signal: this.abort.signal, cache: "no-store" });
        if (!response.ok || !response.body) throw new Error(`the stream answered ${response.status}`);
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end: number;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            this.frame(buffer.slice(0, end));
            buffer = buffer.slice(end + 2);
          }
        }
      } catch (err) {
        if (this.abort.signal.aborted) return;
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    }
  }

  private frame(text: string): void {
    let id: string | null = null;
    let data = "";
    for (const line of text.split("\n")) {
      if (line.startsWith("id: ")) id = line.slice(4);
      else if (line.startsWith("data: ")) data += line.slice(6);
    }
    if (!data) return;
    const event = JSON.parse(data);
    if (id) this.lastEventId = id;
    this.apply(event);
    this.changed();
  }

  private text(content: any[] | undefined): string {
    return (content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
  }

  private upsert(message: any): void {
    const at = this.messages.findIndex((m) => m.id === message.id);
    if (at >= 0) this.messages[at] = message;
    else this.messages.push(message);
  }

  private apply(event: any): void {
    switch (event.type) {
      case "user.message":
        this.upsert({ id: event.id, role: "user", content: this.text(event.content) });
        break;
      case "event_start":
        if (event.event.type === "agent.message") this.upsert({ id: event.event.id, role: "assistant", content: "" });
        break;
      case "event_delta": {
        const message = this.messages.find((m) => m.id === event.event_id);
        if (message) message.content += event.delta.content.text ?? "";
        break;
      }
      case "agent.message":
        this.upsert({ id: event.id, role: "assistant", content: this.text(event.content) });
        break;
      case "agent.tool_use":
      case "agent.custom_tool_use":
        this.upsert({ id: `${event.id}-call`, role: "assistant", content: "",
                      toolCalls: [{ id: event.id, type: "function", function: { name: event.name, arguments: JSON.stringify(event.input) } }] });
        break;
      case "agent.tool_result":
      case "user.custom_tool_result": {
        const result: any = { id: event.id, role: "tool", toolCallId: event.tool_use_id ?? event.custom_tool_use_id,
                              content: this.text(event.content) };
        if (event.is_error) result.error = result.content;
        this.upsert(result);
        break;
      }
      case "session.status_running":
        this.status = "streaming";
        break;
      case "session.status_idle":
        this.status = "ready";
        break;
      case "session.error":
        this.error = event.error?.message ?? "the turn failed";
        break;
    }
  }
}
