// Build the console into awaken/http/console/static/ (committed): console.js, console.css, index.html.
//
//   node build.mjs [OUTDIR]      (default ../awaken/http/console/static)
//
// Deterministic: the same sources and package-lock.json give the same bytes (no timestamps, no
// source maps with absolute paths), so a test can rebuild into a temporary directory and compare.
// index.html names the assets with a hash of their content, so a browser never mixes two builds.
import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import * as esbuild from "esbuild";

const HERE = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] ?? join(HERE, "..", "awaken", "http", "console", "static"));

// Size. package.json pins zod to 3.25.76, the version @ag-ui/client and @ag-ui/proto require and one
// `ai` accepts, so npm installs one zod for both client libraries instead of two (a zod 4 for `ai`
// beside @ag-ui's own 3.25, each bundled with its zod/v4). And zod's namespace object (`z`, which the client libraries import whole) re-exports every locale's
// error messages, which esbuild cannot tree-shake from a namespace; the console only ever uses zod's
// default English messages (nothing calls z.config with another locale), so the locale index is
// reduced to English. Every other module of zod and of the client libraries is bundled as published.
const englishOnly = {
  name: "zod-english-only",
  setup(build) {
    build.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/ }, (args) => ({
      contents: 'export { default as en } from "./en.js";\n',
      resolveDir: dirname(args.path),
      loader: "js",
    }));
  },
};

const result = await esbuild.build({
  absWorkingDir: HERE,
  entryPoints: { console: "src/main.ts" },
  bundle: true,
  write: false,
  outdir: "out",
  format: "esm",
  target: "es2022",
  platform: "browser",
  minify: true,
  legalComments: "none",
  charset: "utf8",
  define: { "process.env.NODE_ENV": '"production"' },
  plugins: [englishOnly],
  logLevel: "warning",
});
const css = await esbuild.build({
  absWorkingDir: HERE, entryPoints: ["src/console.css"], bundle: true, write: false, minify: true, outdir: "out",
  logLevel: "warning",
});

const js = result.outputFiles.find((f) => f.path.endsWith(".js")).contents;
const styles = css.outputFiles.find((f) => f.path.endsWith(".css")).contents;
const tag = (bytes) => createHash("sha256").update(bytes).digest("hex").slice(0, 12);
const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Awaken console</title>
<link rel="stylesheet" href="/console/console.css?v=${tag(styles)}">
</head>
<body>
<noscript>The console needs JavaScript.</noscript>
<script type="module" src="/console/console.js?v=${tag(js)}"></script>
</body>
</html>
`;

mkdirSync(out, { recursive: true });
for (const old of readdirSync(out)) rmSync(join(out, old), { recursive: true, force: true });
writeFileSync(join(out, "console.js"), js);
writeFileSync(join(out, "console.css"), styles);
writeFileSync(join(out, "index.html"), html);
process.stdout.write(`${out}: console.js ${js.length} bytes, console.css ${styles.length} bytes\n`);
