// The console's shell: navigation, the error banner, the token prompt, and the hash router
// (#/sessions, #/sessions/{id}, #/chat, #/agents). Each page gets an AbortSignal that ends its
// polling when the person navigates away.

import "./csp"; // first: before the client libraries build their schemas

import { ApiError, get, onApiEvent, setToken, token } from "./api";
import { agentsPage } from "./agents";
import { chatPage } from "./chat";
import { h } from "./dom";
import { sessionPage } from "./session";
import { sessionsPage } from "./sessions";

const banner = h("div", { id: "banner", role: "alert", hidden: true });
const view = h("main", { id: "view", tabindex: -1 });
const who = h("span", { id: "who", class: "muted" });
const signOut = h("button", { id: "sign-out", type: "button", hidden: true, onclick: () => { setToken(null); route(); } }, "Forget token");
const nav = h("nav", { "aria-label": "console" },
  h("a", { href: "#/sessions", "data-nav": "sessions" }, "Sessions"),
  h("a", { href: "#/chat", "data-nav": "chat" }, "Chat"),
  h("a", { href: "#/agents", "data-nav": "agents" }, "Agents"));
document.body.replaceChildren(
  h("header", { class: "top" }, h("a", { class: "brand", href: "#/sessions" }, "Awaken"), nav, h("span", { class: "spacer" }), who, signOut),
  banner, view);

let needToken = false;
let refusal: ApiError | null = null; // the server's last 401, shown on the token prompt
onApiEvent(({ kind, error }) => {
  if (kind === "unavailable") {
    banner.hidden = false;
    banner.textContent = error?.status === 503
      ? `The server is unavailable (503 ${error.code}): ${error.message.replace(/\.?$/, ".")} Retrying on the next refresh.`
      : `The server could not be reached: ${error?.message ?? ""}`;
  } else if (kind === "ok") {
    banner.hidden = true;
  } else if (kind === "unauthorized" && !needToken) {
    needToken = true;
    refusal = error ?? null;
    route();
  }
});

function tokenPrompt(): void {
  who.textContent = "";
  signOut.hidden = true;
  const field = h("input", { id: "token", type: "password", autocomplete: "off", required: true, "aria-label": "API token" });
  const form = h("form", { id: "token-form", class: "card narrow" },
    h("h1", {}, "Sign in"),
    token()
      ? h("p", { id: "token-refused", class: "error-text", role: "alert" },
        `The server refused that token (401 ${refusal?.code ?? "UNAUTHENTICATED"}${refusal?.message ? `: ${refusal.message}` : ""}). Paste another one.`)
      : h("p", {}, "This server needs a token (an API key or a JWT)."),
    h("label", {}, h("span", {}, "Token"), field),
    h("p", { class: "muted" }, "Kept in this tab only (sessionStorage)."),
    h("button", { type: "submit" }, "Continue"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    setToken(field.value.trim());
    needToken = false;
    route();
  });
  view.replaceChildren(form);
  field.focus();
}

let current: AbortController | null = null;

async function route(): Promise<void> {
  current?.abort();
  const controller = new AbortController();
  current = controller;
  const hash = location.hash.replace(/^#\/?/, "");
  const [path] = hash.split("?");
  const [page, ...rest] = path.split("/");
  for (const a of nav.querySelectorAll("a")) {
    if (a.dataset.nav === (page || "sessions")) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  view.removeAttribute("data-thread");
  view.removeAttribute("data-loaded");
  view.dataset.page = page || "sessions";
  if (needToken) {
    tokenPrompt();
    return;
  }
  try {
    const me = await get("/v1/me");
    who.textContent = me.subject ? `${me.subject} (${me.role})` : `${me.role} (no auth)`;
    signOut.hidden = !token();
    if (page === "chat") await chatPage(view, controller.signal);
    else if (page === "agents") await agentsPage(view);
    else if (page === "sessions" && rest.length) await sessionPage(view, decodeURIComponent(rest.join("/")), controller.signal);
    else await sessionsPage(view, controller.signal);
  } catch (err) {
    if (controller.signal.aborted || needToken) return;
    view.replaceChildren(h("h1", {}, "Something went wrong"),
      h("p", { class: "error-text" }, err instanceof ApiError ? `${err.code}: ${err.message}` : String(err)),
      h("button", { type: "button", onclick: () => route() }, "Try again"));
  }
}

window.addEventListener("hashchange", () => void route());
void route();
