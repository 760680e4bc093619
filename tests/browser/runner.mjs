// The browser runner: one headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core),
// the built test pages served on their own origin, and a small JSON control server the tests talk to.
//
//   node runner.mjs <screenshot dir>
//
// On start it prints one JSON line: {"control": "http://127.0.0.1:P1", "pages": "http://localhost:P2"}.
// The pages origin (`localhost`) differs from the Awaken server's (`127.0.0.1`), so every request a
// page makes to the server is cross-origin, as for a real app.
//
// Control: POST / with {"op": ..., ...} answers {"ok": true, "value": ...} or {"ok": false, "error": ...}.
//   open {tab, path}          open (or reuse) tab `tab` and navigate it to pages/<path> (path has the query),
//                             or to `path` itself when it is an absolute http(s) URL
//   viewport {tab, width, height}   resize the tab's viewport
//   reload {tab}              reload the tab
//   click {tab, selector}     click an element (waits until it is visible and enabled)
//   fill {tab, selector, value}
//   waitFor {tab, predicate, arg?, timeout?}   wait until `predicate(arg)` (a JS function source,
//                             evaluated in the page) is truthy; returns its value. Never a fixed sleep.
//   eval {tab, expression}    the JSON value of a page expression (e.g. "window.__state")
//   text {tab, selector}      the element's innerText
//   screenshot {tab, name}    a full-page PNG under the screenshot dir; returns its path
//   problems {tab}            page errors and console errors seen since the last navigation (a CSP
//                             violation is one: "securitypolicyviolation: …")
//   Tabs bypass the pages' Content-Security-Policy (the harness evaluates predicates with eval()),
//   except tabs named "csp:…", which enforce it; drive those without waitFor/eval.
//   closeTab {tab}, quit {}
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { extname, join, normalize } from "node:path";

import { chromium } from "playwright-core";

import { buildPages } from "./build.mjs";

const CHROMIUM = process.env.AWAKEN_CHROMIUM ?? "/usr/bin/chromium";
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const DEFAULT_TIMEOUT = 15000;

const shots = process.argv[2] ?? join(process.cwd(), "screenshots");
mkdirSync(shots, { recursive: true });
const pagesDir = await buildPages();

// -- the pages' origin -------------------------------------------------------------------------------
const TYPES = { ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css", ".map": "application/json" };
const pages = createServer((req, res) => {
  const path = normalize(decodeURIComponent(new URL(req.url, "http://x").pathname)).replace(/^\/+/, "");
  const file = join(pagesDir, path);
  if (!file.startsWith(pagesDir) || !statSync(file, { throwIfNoEntry: false })?.isFile()) {
    res.writeHead(404).end("not found");
    return;
  }
  res.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream", "cache-control": "no-store" });
  res.end(readFileSync(file));
});
await new Promise((resolve) => pages.listen(0, "127.0.0.1", resolve));
const pagesOrigin = `http://localhost:${pages.address().port}`;

// -- the browser -------------------------------------------------------------------------------------
const profile = mkdtempSync(join(tmpdir(), "awaken-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: CHROMIUM,
  headless: true,
  args: FLAGS,
  viewport: { width: 900, height: 700 },
});
context.setDefaultTimeout(DEFAULT_TIMEOUT);
// a CSP violation is a problem (`problems`), whatever the page reports itself
await context.addInitScript(() => document.addEventListener("securitypolicyviolation", (e) =>
  console.error(`securitypolicyviolation: ${e.violatedDirective} blocked ${e.blockedURI || "inline"} ` +
    `at ${e.sourceFile}:${e.lineNumber}:${e.columnNumber}`)));
const tabs = new Map(); // name -> {page, problems}

async function tab(name) {
  let entry = tabs.get(name);
  if (!entry) {
    const page = tabs.size === 0 && context.pages().length ? context.pages()[0] : await context.newPage();
    // `waitFor` and `eval` evaluate the tests' predicates with eval() in the page, which a page's
    // Content-Security-Policy (the console's: script-src 'self') forbids: every tab bypasses CSP but
    // those named "csp:…", which get the page's policy as a person's browser does (drive them with
    // open/click/fill/text/problems only: those run outside the page's scripts)
    if (!name.startsWith("csp:")) {
      const cdp = await context.newCDPSession(page);
      await cdp.send("Page.setBypassCSP", { enabled: true });
    }
    entry = { page, problems: [] };
    page.on("pageerror", (err) => entry.problems.push(`pageerror: ${err.message}`));
    page.on("console", (msg) => {
      if (msg.type() === "error") entry.problems.push(`console.error: ${msg.text()}`);
    });
    page.on("framenavigated", (frame) => {
      if (frame === page.mainFrame()) entry.problems = [];
    });
    tabs.set(name, entry);
  }
  return entry;
}

function fn(source) {
  // a predicate source such as "(n) => document.querySelectorAll('.message').length >= n"
  return `(${source})`;
}

const ops = {
  async open({ tab: name, path }) {
    const { page } = await tab(name);
    const url = /^https?:/.test(path) ? path : `${pagesOrigin}/${path.replace(/^\//, "")}`;
    await page.goto(url, { waitUntil: "load" });
    return page.url();
  },
  async viewport({ tab: name, width, height }) {
    await (await tab(name)).page.setViewportSize({ width, height });
    return null;
  },
  async reload({ tab: name }) {
    const { page } = await tab(name);
    await page.reload({ waitUntil: "load" });
    return page.url();
  },
  async click({ tab: name, selector }) {
    await (await tab(name)).page.locator(selector).click();
    return null;
  },
  async fill({ tab: name, selector, value }) {
    await (await tab(name)).page.locator(selector).fill(value);
    return null;
  },
  async select({ tab: name, selector, value }) {
    await (await tab(name)).page.locator(selector).selectOption(value);
    return null;
  },
  async press({ tab: name, key }) {
    // a key on whatever has the focus, as a person types it (e.g. "Tab", "Shift+Tab", "Enter", " ")
    await (await tab(name)).page.keyboard.press(key);
    return null;
  },
  async waitFor({ tab: name, predicate, arg = null, timeout = DEFAULT_TIMEOUT }) {
    const { page, problems } = await tab(name);
    try {
      const handle = await page.waitForFunction(
        ([source, a]) => (0, eval)(source)(a), [fn(predicate), arg], { timeout, polling: "raf" });
      return await handle.jsonValue();
    } catch (err) {
      const state = await page.evaluate(() => window.__state).catch(() => null);
      throw new Error(`${err.message.split("\n")[0]}\nwaiting for: ${predicate}\nproblems: ${JSON.stringify(problems)}` +
        `\nstate: ${JSON.stringify(state)}`);
    }
  },
  async eval({ tab: name, expression }) {
    return (await tab(name)).page.evaluate((e) => (0, eval)(e), expression);
  },
  async text({ tab: name, selector }) {
    return (await tab(name)).page.locator(selector).innerText();
  },
  async screenshot({ tab: name, name: file }) {
    const path = join(shots, `${file}.png`);
    await (await tab(name)).page.screenshot({ path, fullPage: true });
    return path;
  },
  async problems({ tab: name }) {
    return (await tab(name)).problems;
  },
  async closeTab({ tab: name }) {
    const entry = tabs.get(name);
    tabs.delete(name);
    if (entry) await entry.page.close();
    return null;
  },
  async quit() {
    setImmediate(shutdown);
    return null;
  },
};

// -- the control server ------------------------------------------------------------------------------
const control = createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", async () => {
    let answer;
    try {
      const command = JSON.parse(Buffer.concat(chunks).toString());
      const op = ops[command.op];
      if (!op) throw new Error(`unknown op ${command.op}`);
      answer = { ok: true, value: (await op(command)) ?? null };
    } catch (err) {
      answer = { ok: false, error: String(err && err.message ? err.message : err) };
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer));
  });
});
await new Promise((resolve) => control.listen(0, "127.0.0.1", resolve));

let closing = false;
async function shutdown() {
  if (closing) return;
  closing = true;
  control.close();
  pages.close();
  await context.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
  process.exit(0);
}
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);
process.stdin.on("end", shutdown); // the test process went away: do not outlive it
process.stdin.resume();

process.stdout.write(`${JSON.stringify({ control: `http://127.0.0.1:${control.address().port}`, pages: pagesOrigin })}\n`);
