// Validate JSON documents with the real @ag-ui/core 1.0.0 zod schemas (what @ag-ui/client 1.x checks).
//
//   node agui_schema.mjs <SchemaName>   (stdin: a JSON array of documents)
//
// Prints {results: [{ok, error?, stripped?}]}: `error` is zod's message when a document fails, and
// `stripped` is true when it passes only because the schema dropped something (an unknown key). The
// script itself never decides pass/fail.
import * as schemas from "agui-core-1/schemas";

const [name] = process.argv.slice(2);
const schema = schemas[name];
if (!schema) {
  process.stdout.write(JSON.stringify({ fatal: `no schema ${name}` }));
  process.exit(2);
}
let input = "";
for await (const chunk of process.stdin) input += chunk;
const results = JSON.parse(input).map((doc) => {
  const parsed = schema.safeParse(doc);
  if (!parsed.success) return { ok: false, error: parsed.error.message };
  return { ok: true, stripped: JSON.stringify(sortKeys(parsed.data)) !== JSON.stringify(sortKeys(doc)) };
});
process.stdout.write(JSON.stringify({ results }));

function sortKeys(value) {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.keys(value).sort().map((k) => [k, sortKeys(value[k])]));
  }
  return value;
}
