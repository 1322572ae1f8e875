// as-filter: the filter processor in AssemblyScript, behaving as the Go
// example: it keeps only the records whose value contains the bytes of the
// record header "match", or, when the header is absent, the word "keep".
// Dropped records succeed with no output.
//
// Build (from the repository root; see abi/sdk/assemblyscript/README.md):
//   node abi/sdk/assemblyscript/build.mjs plugins/examples/as-filter/assembly/index.ts filter.wasm
import { register, Record, Emitter, Output, Outcome, ok, bytesContains } from "../../../../abi/sdk/assemblyscript/assembly/index";
export * from "../../../../abi/sdk/assemblyscript/assembly/exports";

const KEEP = Uint8Array.wrap(String.UTF8.encode("keep"));

function filter(r: Record, out: Emitter): Outcome {
  let want: Uint8Array | null = KEEP;
  const m = r.header("match");
  if (m !== null) want = m.value; // a null header value matches everything, as a nil slice does in Go
  if (!bytesContains(r.value, want)) return ok();
  return out.emit(new Output(r.key, r.value, r.headers));
}

register(filter);
