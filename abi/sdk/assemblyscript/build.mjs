// Builds an AssemblyScript processor with the SDK's flags:
//
//   node abi/sdk/assemblyscript/build.mjs <entry.ts> <out.wasm> [extra asc flags]
//
// -O3, the incremental runtime, and the SDK's abort function in place of the
// env.abort import (the host refuses imports outside wasmstream_v1,
// wasmstream_batch_v1 and WASI).
// The module keeps AssemblyScript's start section, which the host runs at
// instantiation (ABI.md §1, "Start"). asc runs in the entry file's
// directory and names the abort function by its path relative to it, which
// is how asc names the SDK's file when the entry imports it by a relative
// path (as the examples do).
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const sdk = dirname(fileURLToPath(import.meta.url));
const [entry, out, ...extra] = process.argv.slice(2);
if (!entry || !out) {
  console.error("usage: node build.mjs <entry.ts> <out.wasm> [asc flags]");
  process.exit(2);
}
// The compiler: in the SDK's node_modules (the checkout: npm ci there), else
// in the nearest one above it (a project with the SDK copied into sdk/).
let asc = null;
for (let d = sdk; ; d = dirname(d)) {
  const p = join(d, "node_modules", "assemblyscript", "bin", "asc.js");
  if (existsSync(p)) { asc = p; break; }
  if (dirname(d) === d) break;
}
if (!asc) {
  console.error(`no AssemblyScript compiler in node_modules in or above ${sdk}: npm install (or npm ci) there`);
  process.exit(1);
}
const cwd = dirname(resolve(entry));
const abortName = relative(cwd, join(sdk, "assembly", "abort")).split("\\").join("/") + "/wasmstreamAbort";
const args = [
  asc, relative(cwd, resolve(entry)),
  "-O3", "--runtime", "incremental",
  "--use", "abort=" + abortName,
  "-o", resolve(out),
  ...extra,
];
const r = spawnSync(process.execPath, args, { cwd, stdio: "inherit" });
process.exit(r.status === null ? 1 : r.status);
