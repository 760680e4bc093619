// Bundle the app with esbuild into dist/: index.html and app.js (npm run build).
import { copyFileSync, mkdirSync } from "node:fs";

import * as esbuild from "esbuild";

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
  logLevel: "warning",
});
copyFileSync("src/index.html", "dist/index.html");
