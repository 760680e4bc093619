// A run's trace as a timeline: its spans (admission, each step, each model call, each tool call, each
// wait at a gate, each ledger commit) as the server recorded them (the thread detail's runs[].timeline,
// awaken/telemetry/tracing.py), one row each, nested under their parent, with a bar on one time axis,
// the duration, the tokens and the error. A resumed run has one root per execution on the same axis.
//
// The bars are placed through the CSSOM (element.style), which the page's CSP (style-src 'self')
// allows where a style attribute would be refused.

import { h } from "./dom";

export interface TimelineSpan {
  id: number;
  parentId: number | null;
  kind: string;
  name: string;
  start: number;
  end: number | null;
  durationMs: number | null;
  attributes: Record<string, any>;
  error: string | null;
}

export interface Timeline {
  spans: TimelineSpan[];
  dropped: number;
}

/** The spans depth first (children after their parent, each level in start order), with their depth. */
export function ordered(spans: TimelineSpan[]): [TimelineSpan, number][] {
  const ids = new Set(spans.map((s) => s.id));
  const children = new Map<number | null, TimelineSpan[]>();
  for (const s of spans) {
    const parent = s.parentId !== null && ids.has(s.parentId) ? s.parentId : null;
    children.set(parent, [...(children.get(parent) ?? []), s]);
  }
  const out: [TimelineSpan, number][] = [];
  const visit = (parent: number | null, depth: number): void => {
    for (const s of (children.get(parent) ?? []).sort((a, b) => a.start - b.start || a.id - b.id)) {
      out.push([s, depth]);
      visit(s.id, depth + 1);
    }
  };
  visit(null, 0);
  return out;
}

/** What a person calls the span. */
export function label(s: TimelineSpan): string {
  const a = s.attributes;
  const target = s.name.split(" ").slice(1).join(" ");
  switch (s.kind) {
    case "run": return `${a.resumed ? "Resumed run" : "Run"} · ${target}`;
    case "admission": return "Admission";
    case "step": return `Step ${a.step ?? target}`;
    case "model": return `Model ${a.model ?? target}`;
    case "tool": return `Tool ${a.tool ?? target}${a.toolKind ? ` (${a.toolKind})` : ""}`;
    case "gate": return `Gate ${a.tool ?? target}`;
    case "commit": return `Commit ${a.commitStatus ?? target}`;
    default: return s.name;
  }
}

export function ms(value: number | null): string {
  if (value === null) return "running";
  if (value < 10) return `${value.toFixed(2)} ms`;
  if (value < 1000) return `${Math.round(value)} ms`;
  if (value < 60000) return `${(value / 1000).toFixed(1)} s`;
  return `${Math.floor(value / 60000)} min ${Math.round((value % 60000) / 1000)} s`;
}

/** The figures beside a span: its duration, then what it adds (tokens, the decision, the outcome). */
export function figures(s: TimelineSpan): string[] {
  const a = s.attributes;
  const out = [ms(s.durationMs)];
  if (a.inputTokens !== undefined || a.outputTokens !== undefined) {
    out.push(`${a.inputTokens ?? 0} in / ${a.outputTokens ?? 0} out tokens`);
  }
  if (a.finishReasons) out.push(`finish: ${[].concat(a.finishReasons).join(", ")}`);
  if (a.decision) out.push(`${a.decision}${a.decidedBy ? ` by ${a.decidedBy}` : ""}`);
  if (a.toolStatus && a.toolStatus !== "ok") out.push(a.toolStatus);
  if (a.messages !== undefined && s.kind === "commit") out.push(`${a.messages} message${a.messages === 1 ? "" : "s"}`);
  if (s.kind === "run" && a.status) out.push(a.status + (a.cause ? ` (${a.cause})` : ""));
  return out;
}

export function timelineView(runId: string, timeline: Timeline): HTMLElement {
  const rows = ordered(timeline.spans);
  const t0 = Math.min(...timeline.spans.map((s) => s.start));
  const t1 = Math.max(...timeline.spans.map((s) => s.end ?? s.start));
  const span = Math.max(t1 - t0, 0.001);
  const list = h("ol", { class: "spans" }, rows.map(([s, depth]) => {
    const bar = h("span", { class: "bar" });
    bar.style.marginLeft = `${((s.start - t0) / span) * 100}%`;
    bar.style.width = `${(((s.end ?? t1) - s.start) / span) * 100}%`;
    const name = h("span", { class: "span-name", title: s.name }, label(s));
    name.style.paddingLeft = `${depth * 12}px`;
    return h("li", { class: `span kind-${s.kind}${s.error ? " failed" : ""}`, "data-kind": s.kind, "data-span": s.id,
      "data-depth": depth, "data-error": s.error ?? undefined },
      name,
      h("span", { class: "track", "aria-hidden": "true" }, bar),
      h("span", { class: "figures" }, figures(s).join(" · "),
        s.error ? h("span", { class: "span-error error-text" }, ` · error ${s.error}`) : null));
  }));
  return h("section", { class: "timeline", "data-run": runId, "aria-label": `timeline of run ${runId}` },
    h("h3", {}, h("code", {}, runId), h("span", { class: "muted" }, ` · ${ms(t1 - t0)} from admission to the last span`)),
    list,
    timeline.dropped ? h("p", { class: "muted" }, `${timeline.dropped} more spans were not kept.`) : null);
}

/** The timelines of the runs the server still holds them for (the most recent ones it ran). */
export function timelines(runs: any[]): HTMLElement {
  const kept = runs.filter((r) => r.timeline && r.timeline.spans.length);
  if (!kept.length) {
    return h("p", { class: "muted" }, "No timings: the server keeps them for the runs it ran recently.");
  }
  return h("div", { class: "timelines" }, kept.map((r) => timelineView(r.runId, r.timeline)));
}
