// Lets `@modelcontextprotocol/conformance` run on Node 20.
//
// Its bundled CLI does `import { globSync } from "fs"`, which exists only from Node 22, so on
// Node 20 the module fails to link before any command runs. (The suite only calls globSync in
// its `tier-check` command, never in `server` mode.) Load this file with
// `NODE_OPTIONS=--import /abs/path/node20-globsync.mjs`: it registers a resolve hook that
// sends the suite's own `fs` imports to a small module re-exporting `node:fs` plus a minimal
// `globSync`. Nothing else is touched, and on a Node that has `fs.globSync` it does nothing.
//
// This one file is both the `--import` entry (main thread: registers itself) and the hooks
// module (Node runs hooks on a separate thread, where `isMainThread` is false).

import fs from "node:fs";
import { register } from "node:module";
import { isMainThread } from "node:worker_threads";

// The replacement `fs`: everything from `node:fs`, plus a globSync that understands `*`, `?`
// and `**/` relative to `cwd` — enough for the suite's `**/checks.json`.
const SHIM = `
import fs from "node:fs";
export * from "node:fs";
export default fs;
export function globSync(pattern, options = {}) {
  const cwd = options.cwd ?? ".";
  let re = "";
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (pattern.startsWith("**/", i)) { re += "(?:.*/)?"; i += 2; }
    else if (c === "*") re += "[^/]*";
    else if (c === "?") re += "[^/]";
    else re += c.replace(/[.+^\${}()|[\\]\\\\]/g, "\\\\$&");
  }
  const matcher = new RegExp("^" + re + "$");
  return fs.readdirSync(cwd, { recursive: true })
    .map((p) => String(p).split("\\\\").join("/"))
    .filter((p) => matcher.test(p));
}
`;
const SHIM_URL = "data:text/javascript," + encodeURIComponent(SHIM);

const SUITE = "/node_modules/@modelcontextprotocol/conformance/";

export async function resolve(specifier, context, next) {
  if (
    (specifier === "fs" || specifier === "node:fs") &&
    context.parentURL?.includes(SUITE)
  ) {
    return { url: SHIM_URL, shortCircuit: true };
  }
  return next(specifier, context);
}

if (isMainThread && typeof fs.globSync !== "function") {
  register(import.meta.url);
}
