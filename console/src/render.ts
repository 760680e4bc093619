// How a conversation reads for a person: AI SDK UIMessages (the session view and the AI SDK chat)
// and AG-UI messages (the AG-UI chat) rendered to the same DOM: text, folded reasoning, each tool
// call with its arguments, result and gate, buttons for what waits on a person, and the mark of an answer
// its run's early end cut off ("incomplete — stopped": what was streamed is kept).

import { h, json } from "./dom";

export type Actions = {
  /** a permission gate: approve or deny (with a reason) */
  decide?: (call: { toolCallId: string; approvalId?: string }, approved: boolean, reason: string) => void;
  /** a client tool: answer it with the text typed */
  answer?: (call: { toolCallId: string; tool: string }, text: string) => void;
};

function gateButtons(actions: Actions, call: { toolCallId: string; approvalId?: string }): HTMLElement {
  const reason = h("input", { class: "reason", placeholder: "reason (optional)", "aria-label": "reason for a denial" });
  return h("div", { class: "actions" },
    h("button", { class: "approve", type: "button", onclick: () => actions.decide?.(call, true, "") }, "Approve"),
    h("button", { class: "deny danger", type: "button", onclick: () => actions.decide?.(call, false, reason.value) }, "Deny"),
    reason);
}

function answerBox(actions: Actions, call: { toolCallId: string; tool: string }): HTMLElement {
  const input = h("input", { class: "answer-text", placeholder: "your answer", "aria-label": `answer to ${call.tool}` });
  const form = h("form", { class: "actions" }, input, h("button", { class: "answer", type: "submit" }, "Answer"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    actions.answer?.(call, input.value);
  });
  return form;
}

function block(label: string, cls: string, value: unknown): HTMLElement {
  return h("div", { class: `field ${cls}` }, h("span", { class: "label" }, label), h("pre", { class: "value" }, json(value)));
}

const STATE_LABEL: Record<string, string> = {
  "input-streaming": "calling…",
  "input-available": "waiting for the client",
  "approval-requested": "waiting for approval",
  "approval-responded": "decided",
  "output-available": "done",
  "output-error": "error",
  "output-denied": "denied",
};

/** One AI SDK tool part (``tool-<name>`` or ``dynamic-tool``). */
export function toolPart(part: any, clientTools: Set<string>, actions: Actions, live: boolean): HTMLElement {
  const name = part.type === "dynamic-tool" ? part.toolName : part.type.slice("tool-".length);
  const client = clientTools.has(name);
  const node = h("div", { class: "part tool", "data-part": "tool", "data-tool": name, "data-call": part.toolCallId,
                          "data-state": part.state },
    h("div", { class: "tool-head" }, h("code", { class: "tool-name" }, name),
      h("span", { class: `badge state-${part.state}` }, STATE_LABEL[part.state] ?? part.state),
      client ? h("span", { class: "badge" }, "client tool") : null));
  if ("input" in part) node.append(block("Arguments", "input", part.input));
  else if ("rawInput" in part) node.append(block("Arguments (not JSON)", "input", part.rawInput));
  const approval = part.approval;
  if (approval && approval.approved === true) {
    node.append(h("div", { class: "gate", "data-decision": "approved" }, "Gate: approved by a person"));
  } else if (approval && approval.approved === false) {
    node.append(h("div", { class: "gate", "data-decision": "denied" },
      "Gate: denied by a person", approval.reason ? h("span", { class: "gate-reason" }, ` — ${approval.reason}`) : null));
  } else if (part.state === "approval-requested") {
    node.append(h("div", { class: "gate", "data-decision": "pending" }, "Gate: waiting for a person"));
  }
  if (part.state === "output-available") {
    node.append(block(client ? "Client answer" : "Result", "output", part.output));
  } else if (part.state === "output-error") {
    node.append(block("Error", "error", part.errorText));
  }
  if (live && part.state === "approval-requested" && actions.decide) {
    node.append(gateButtons(actions, { toolCallId: part.toolCallId, approvalId: approval?.id }));
  } else if (live && part.state === "input-available" && client && actions.answer) {
    node.append(answerBox(actions, { toolCallId: part.toolCallId, tool: name }));
  }
  return node;
}

function reasoning(text: string): HTMLElement {
  return h("details", { class: "part reasoning", "data-part": "reasoning" },
    h("summary", {}, "Reasoning"), h("pre", { class: "value" }, text));
}

/** What an answer cut off by its run's early end is called (``metadata.incomplete``, the reason). */
const CUT_OFF: Record<string, string> = {
  stopped: "stopped",
  client_gone: "the client left",
  client_too_slow: "the client read too slowly",
  shutdown: "the server shut down",
  superseded: "a new message took over",
  failed: "the run failed",
};

/** The mark under an answer the run's early end cut off: the words above are what was streamed. */
function incomplete(reason: unknown): HTMLElement | null {
  if (typeof reason !== "string") return null;
  return h("div", { class: "incomplete muted", "data-incomplete": reason }, `incomplete — ${CUT_OFF[reason] ?? reason}`);
}

/** UIMessages as a list; ``live``: buttons for what waits on a person. */
export function uiMessages(messages: any[], clientTools: Set<string>, actions: Actions = {}, live = false): HTMLElement {
  return h("ol", { class: "messages", "aria-live": "polite" }, messages.map((m) =>
    h("li", { class: "message", "data-role": m.role, "data-id": m.id },
      h("div", { class: "who" }, m.role),
      (m.parts ?? []).map((p: any) => {
        if (p.type === "text") return h("p", { class: "part text", "data-part": "text" }, p.text);
        if (p.type === "reasoning") return reasoning(p.text);
        if (p.type === "file") return h("img", { class: "part file", "data-part": "file", src: p.url, alt: p.mediaType });
        if (p.type === "dynamic-tool" || p.type.startsWith("tool-")) return toolPart(p, clientTools, actions, live);
        return null; // step-start, source and data parts
      }),
      incomplete(m.metadata?.incomplete))));
}

/** AG-UI messages as the same list: tool results are shown with their call. */
export function aguiMessages(messages: any[], clientTools: Set<string>, actions: Actions, live: boolean): HTMLElement {
  const results = new Map(messages.filter((m) => m.role === "tool").map((m) => [m.toolCallId, m]));
  return h("ol", { class: "messages", "aria-live": "polite" }, messages.filter((m) => m.role !== "tool").map((m) => {
    if (m.role === "reasoning") {
      return h("li", { class: "message", "data-role": "assistant", "data-id": m.id }, reasoning(m.content ?? ""));
    }
    const text = typeof m.content === "string" ? m.content
      : Array.isArray(m.content) ? m.content.filter((c: any) => c.type === "text").map((c: any) => c.text).join("") : "";
    return h("li", { class: "message", "data-role": m.role, "data-id": m.id },
      h("div", { class: "who" }, m.role),
      text ? h("p", { class: "part text", "data-part": "text" }, text) : null,
      (m.toolCalls ?? []).map((call: any) => {
        const result = results.get(call.id);
        let input: unknown = call.function.arguments;
        try {
          input = JSON.parse(call.function.arguments);
        } catch {
          // shown as the text the model produced
        }
        const part: any = { type: `tool-${call.function.name}`, toolCallId: call.id, input };
        if (!result) part.state = !live ? "input-streaming" : clientTools.has(call.function.name) ? "input-available" : "approval-requested";
        else if (result.error !== undefined) Object.assign(part, { state: "output-error", errorText: result.error });
        else {
          let output: unknown = result.content;
          try {
            output = JSON.parse(result.content);
          } catch {
            // plain text
          }
          Object.assign(part, { state: "output-available", output });
        }
        return toolPart(part, clientTools, actions, live && !result);
      }),
      incomplete(m.metadata?.incomplete));
  }));
}
