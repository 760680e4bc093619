// The real client libraries, wired to this server: an AI SDK chat (ai's AbstractChat over
// DefaultChatTransport for SSE, or a WebSocket ChatTransport) and an AG-UI agent (HttpAgent for SSE,
// or an AbstractAgent over a WebSocket). Each socket carries one request at a time, as the server
// wants; the frames are exactly what SSE puts after `data: `.

import { AbstractAgent, type BaseEvent, HttpAgent, type Message as AguiMessage, type RunAgentInput } from "@ag-ui/client";
import {
  AbstractChat,
  type ChatState,
  type ChatStatus,
  type ChatTransport,
  DefaultChatTransport,
  type UIMessage,
  type UIMessageChunk,
} from "ai";
import { Observable } from "rxjs";

import { authHeaders, wsBase, wsProtocols } from "./api";

export type Transport = "sse" | "ws";

/** One socket, opened on first use; `send` gives the frames of one request until `isLast` says so. */
class Socket {
  private ws: WebSocket | null = null;
  private opening: Promise<WebSocket> | null = null;
  private onFrame: ((data: string) => void) | null = null;
  private onClose: ((reason: string) => void) | null = null;

  constructor(private readonly url: string) {}

  private open(): Promise<WebSocket> {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) return Promise.resolve(this.ws);
    if (this.opening) return this.opening;
    this.opening = new Promise((resolve, reject) => {
      const ws = new WebSocket(this.url, wsProtocols());
      ws.onopen = () => {
        this.ws = ws;
        this.opening = null;
        resolve(ws);
      };
      ws.onerror = () => undefined; // the close event says what happened
      ws.onclose = (e) => {
        this.ws = null;
        this.opening = null;
        reject(new Error(`the socket closed (${e.code}${e.reason ? ` ${e.reason}` : ""})`));
        this.onClose?.(`the socket closed (${e.code}${e.reason ? ` ${e.reason}` : ""})`);
      };
      ws.onmessage = (e) => this.onFrame?.(String(e.data));
    });
    return this.opening;
  }

  /** Send one request body; `frame` gets each text frame, `closed` a socket that ended first. */
  async send(body: unknown, frame: (data: string) => void, closed: (reason: string) => void): Promise<void> {
    const ws = await this.open();
    this.onFrame = frame;
    this.onClose = closed;
    ws.send(JSON.stringify(body));
  }

  /** The current request is over: later frames go nowhere. */
  release(): void {
    this.onFrame = null;
    this.onClose = null;
  }

  close(): void {
    this.release();
    this.ws?.close();
    this.ws = null;
  }
}

// -- AI SDK ------------------------------------------------------------------------------------------

class WsChatTransport implements ChatTransport<UIMessage> {
  private readonly socket: Socket;
  constructor(url: string) {
    this.socket = new Socket(url);
  }

  async sendMessages(options: Parameters<ChatTransport<UIMessage>["sendMessages"]>[0]): Promise<ReadableStream<UIMessageChunk>> {
    const { chatId, messages, trigger, messageId, abortSignal, body } = options;
    const socket = this.socket;
    return new ReadableStream<UIMessageChunk>({
      start: async (controller) => {
        let done = false;
        const finish = (error?: Error) => {
          if (done) return;
          done = true;
          socket.release();
          if (error) controller.error(error);
          else controller.close();
        };
        abortSignal?.addEventListener("abort", () => {
          socket.close(); // the server interrupts the run when its socket goes
          finish();
        });
        try {
          await socket.send({ ...(body ?? {}), id: chatId, messages, trigger, messageId },
            (data) => {
              if (data === "[DONE]") return finish();
              if (!done) controller.enqueue(JSON.parse(data));
            },
            (reason) => finish(new Error(reason)));
        } catch (err) {
          finish(err as Error);
        }
      },
    });
  }

  async reconnectToStream(): Promise<ReadableStream<UIMessageChunk> | null> {
    return null;
  }

  close(): void {
    this.socket.close();
  }
}

class ListState implements ChatState<UIMessage> {
  private _status: ChatStatus = "ready";
  private _error: Error | undefined = undefined;
  constructor(public messages: UIMessage[], private readonly changed: () => void) {}
  get status(): ChatStatus {
    return this._status;
  }
  set status(value: ChatStatus) {
    this._status = value;
    this.changed();
  }
  get error(): Error | undefined {
    return this._error;
  }
  set error(value: Error | undefined) {
    this._error = value;
    this.changed();
  }
  pushMessage = (message: UIMessage) => {
    this.messages = [...this.messages, message];
    this.changed();
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
    this.changed();
  };
  replaceMessage = (index: number, message: UIMessage) => {
    this.messages = [...this.messages.slice(0, index), this.snapshot(message), ...this.messages.slice(index + 1)];
    this.changed();
  };
  snapshot = <T>(thing: T): T => structuredClone(thing);
}

const WAITING = new Set(["approval-requested", "input-available"]);
const isTool = (p: any) => p.type === "dynamic-tool" || p.type.startsWith("tool-");

/** An AI SDK chat on a thread. After a person answers every call the last message waits on, the
 * chat sends again by itself (the same server run continues). */
export class AiSdkChat extends AbstractChat<UIMessage> {
  private resend = false;
  private waiter: ((status: ChatStatus) => void) | null = null;
  private readonly transport_: ChatTransport<UIMessage>;

  constructor(threadId: string, agentId: string, transport: Transport, initial: UIMessage[], changed: () => void) {
    const path = transport === "sse"
      ? `/v1/ai-sdk/agents/${encodeURIComponent(agentId)}/chat`
      : `${wsBase()}/v1/ai-sdk/agents/${encodeURIComponent(agentId)}/ws`;
    const wire: ChatTransport<UIMessage> = transport === "sse"
      ? new DefaultChatTransport({ api: path, headers: () => authHeaders() })
      : new WsChatTransport(path);
    let self: AiSdkChat | null = null;
    super({
      id: threadId,
      transport: wire,
      state: new ListState(initial, () => {
        changed();
        if (self) self.waiter?.(self.status);
      }),
      sendAutomaticallyWhen: ({ messages }) => self?.shouldResend(messages) ?? false,
    });
    self = this;
    this.transport_ = wire;
  }

  private shouldResend(messages: UIMessage[]): boolean {
    if (!this.resend) return false;
    const last = messages[messages.length - 1];
    if (last?.role === "assistant" && last.parts.some((p: any) => isTool(p) && WAITING.has(p.state))) return false;
    this.resend = false;
    return true;
  }

  /** Do `work` (an answer); when it makes the chat send again, settle when that request is over. */
  private async answering(work: () => Promise<void>): Promise<void> {
    let started = false;
    const over = new Promise<void>((resolve) => {
      this.waiter = (status) => {
        if (status === "submitted" || status === "streaming") started = true;
        else if (started) resolve();
      };
    });
    this.resend = true;
    await work();
    if (!this.resend) await over; // the chat decided to send: wait for that request to end
    this.resend = false;
    this.waiter = null;
  }

  decide(approvalId: string, approved: boolean, reason: string): Promise<void> {
    return this.answering(() => this.addToolApprovalResponse({ id: approvalId, approved, ...(reason ? { reason } : {}) }));
  }

  answer(tool: string, toolCallId: string, text: string): Promise<void> {
    return this.answering(() => this.addToolOutput({ tool: tool as never, toolCallId, output: { answer: text } } as never));
  }

  close(): void {
    if (this.transport_ instanceof WsChatTransport) this.transport_.close();
  }
}

// -- AG-UI -------------------------------------------------------------------------------------------

const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

class WsAgent extends AbstractAgent {
  private readonly socket: Socket;
  constructor(url: string, threadId: string, initialMessages: AguiMessage[]) {
    super({ threadId, initialMessages });
    this.socket = new Socket(url);
  }

  run(input: RunAgentInput): Observable<BaseEvent> {
    return new Observable<BaseEvent>((subscriber) => {
      let over = false;
      this.socket.send(input,
        (data) => {
          if (over) return;
          const event = JSON.parse(data) as BaseEvent;
          subscriber.next(event);
          if (TERMINAL.has(event.type)) {
            over = true;
            this.socket.release();
            subscriber.complete();
          }
        },
        (reason) => {
          if (!over) subscriber.error(new Error(reason));
        }).catch((err) => subscriber.error(err));
      return () => {
        if (!over) this.socket.close(); // unsubscribed mid-run: drop the socket, the server interrupts
      };
    });
  }

  close(): void {
    this.socket.close();
  }
}

export function aguiAgent(threadId: string, agentId: string, transport: Transport, initial: AguiMessage[]): AbstractAgent & { close?: () => void } {
  if (transport === "ws") {
    return new WsAgent(`${wsBase()}/v1/ag-ui/agents/${encodeURIComponent(agentId)}/ws`, threadId, initial);
  }
  return new HttpAgent({ url: `/v1/ag-ui/agents/${encodeURIComponent(agentId)}`, headers: authHeaders(), threadId,
                         initialMessages: initial });
}
