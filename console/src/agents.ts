// The agents page: each agent's model, tools (kind: built-in, plugin, client or MCP, with the MCP
// server a tool comes from; permission) and description.

import { get } from "./api";
import { h } from "./dom";

export type Agent = {
  id: string;
  description: string;
  model: string;
  tools: { name: string; description: string; kind: string; permission: string }[];
};

let cached: Promise<{ default: string; agents: Agent[] }> | null = null;
export function agents(): Promise<{ default: string; agents: Agent[] }> {
  cached ??= get("/v1/agents").catch((err) => {
    cached = null;
    throw err;
  });
  return cached;
}

export function clientTools(list: Agent[], agentId: string | null): Set<string> {
  const agent = list.find((a) => a.id === agentId);
  return new Set((agent?.tools ?? []).filter((t) => t.kind === "client").map((t) => t.name));
}

export async function agentsPage(view: HTMLElement): Promise<void> {
  const { default: fallback, agents: list } = await agents();
  view.replaceChildren(h("h1", {}, "Agents"),
    h("div", { class: "cards" }, list.map((a) =>
      h("section", { class: "card agent", "data-agent": a.id },
        h("h2", {}, a.id, a.id === fallback ? h("span", { class: "badge" }, "default") : null),
        h("p", { class: "description" }, a.description || "No description."),
        h("dl", {}, h("dt", {}, "Model"), h("dd", { class: "model" }, a.model)),
        a.tools.length === 0 ? h("p", { class: "muted" }, "No tools.") :
          h("table", { class: "tools" },
            h("thead", {}, h("tr", {}, h("th", {}, "Tool"), h("th", {}, "Kind"), h("th", {}, "Permission"))),
            h("tbody", {}, a.tools.map((t) => h("tr", { "data-tool": t.name },
              h("td", {}, h("code", {}, t.name), h("div", { class: "muted" }, t.description)),
              h("td", { class: "kind" }, t.kind,
                t.kind === "mcp" && t.name.includes("__") ? h("div", { class: "muted mcp-server" }, `via ${t.name.split("__")[0]}`) : null),
              h("td", { class: "permission" }, h("span", { class: `badge perm-${t.permission}` }, t.permission))))))),
    )));
}
