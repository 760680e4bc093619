// Bundle the app with esbuild into dist/: index.html, app.js, app.css and the fonts app.css names
// (npm run build). CopilotKit's chat imports KaTeX's stylesheet, whose math fonts are .woff2/.woff/.ttf
// files: the `file` loader copies each into dist/fonts/ and points the CSS at it, so nothing is fetched
// from elsewhere, at build time or in the browser.
import { copyFileSync, mkdirSync, rmSync } from "node:fs";

import * as esbuild from "esbuild";

rmSync("dist", { recursive: true, force: true });
mkdirSync("dist", { recursive: true });
await esbuild.build({
  entryPoints: ["src/app.tsx"],
  outfile: "dist/app.js",
  bundle: true,
  format: "esm",
  target: "es2022",
  jsx: "automatic",
  minify: true,
  define: { "process.env.NODE_ENV": '"production"' },
  loader: { ".woff2": "file", ".woff": "file", ".ttf": "file" },
  assetNames: "fonts/[name]-[hash]",
  logLevel: "warning",
});
copyFileSync("src/index.html", "dist/index.html");
