// Bundle the test pages with esbuild, cached by input hash.
//
//   node build.mjs            prints the output directory
//   import { buildPages } from "./build.mjs"
//
// The hash covers every file under pages/, this script and package-lock.json (the library versions),
// so a changed page or an upgraded library rebuilds, and anything else reuses .build/<hash>/.
// Each page `pages/<name>.ts(x)` becomes `<name>.js` plus `<name>.html` (a #root div and the script;
// the page's stylesheet `<name>.css` too when the page imports CSS).
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import * as esbuild from "esbuild";

const HERE = dirname(fileURLToPath(import.meta.url));
const PAGES = join(HERE, "pages");
const CACHE = join(HERE, ".build");

function inputHash() {
  const hash = createHash("sha256");
  const files = readdirSync(PAGES).sort().map((f) => join(PAGES, f));
  for (const file of [...files, fileURLToPath(import.meta.url), join(HERE, "package-lock.json")]) {
    hash.update(file.slice(HERE.length)).update("\0").update(readFileSync(file)).update("\0");
  }
  return hash.digest("hex").slice(0, 16);
}

function html(name, css) {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${name}</title>
<style>
  body { font: 15px/1.4 sans-serif; margin: 16px; max-width: 760px; }
  .message { margin: 6px 0; padding: 6px 8px; border-radius: 6px; background: #f3f3f3; list-style: none; }
  .message[data-role="user"] { background: #dcecff; }
  .message b { display: block; font-size: 12px; color: #555; }
  .part { margin: 2px 0; } .tool code { background: #fff3cd; }
  #status { color: #666; font-size: 12px; } #error { color: #b00; }
  textarea { width: 70%; height: 2.5em; vertical-align: middle; }
</style>${css ? `<link rel="stylesheet" href="./${name}.css">` : ""}</head>
<body><div id="root"></div><script type="module" src="./${name}.js"></script></body></html>
`;
}

/** Build (or reuse) the bundles; returns the directory holding `<name>.html` and `<name>.js`. */
export async function buildPages() {
  const out = join(CACHE, inputHash());
  if (existsSync(join(out, "DONE"))) return out;
  // common*.ts(x) are modules the pages share, not pages
  const entries = readdirSync(PAGES).filter((f) => /\.tsx?$/.test(f) && !f.startsWith("common"));
  const tmp = `${out}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  await esbuild.build({
    entryPoints: entries.map((f) => join(PAGES, f)),
    outdir: tmp,
    bundle: true,
    format: "esm",
    target: "es2022",
    platform: "browser",
    jsx: "automatic",
    sourcemap: true,
    define: { "process.env.NODE_ENV": '"production"' },
    // CopilotKit's chat imports KaTeX's stylesheet, whose math fonts no test page shows
    loader: { ".woff2": "empty", ".woff": "empty", ".ttf": "empty" },
    logLevel: "warning",
  });
  for (const f of entries) {
    const name = f.replace(/\.tsx?$/, "");
    writeFileSync(join(tmp, `${name}.html`), html(name, existsSync(join(tmp, `${name}.css`))));
  }
  writeFileSync(join(tmp, "DONE"), "");
  for (const old of readdirSync(CACHE)) {
    if (!old.includes(".tmp-")) rmSync(join(CACHE, old), { recursive: true, force: true }); // stale builds
  }
  renameSync(tmp, out);
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.stdout.write(`${await buildPages()}\n`);
}
