// as-uppercase: the uppercase processor in AssemblyScript. It emits each
// record with its value upper-cased exactly as the Go example's
// bytes.ToUpper does (null stays null), keeping key and headers.
//
// Build (from the repository root; see abi/sdk/assemblyscript/README.md):
//   node abi/sdk/assemblyscript/build.mjs plugins/examples/as-uppercase/assembly/index.ts uppercase.wasm
import { register, Record, Emitter, Output, Outcome, bytesToUpper } from "../../../../abi/sdk/assemblyscript/assembly/index";
export * from "../../../../abi/sdk/assemblyscript/assembly/exports";

function uppercase(r: Record, out: Emitter): Outcome {
  const v = r.value;
  return out.emit(new Output(r.key, v === null ? null : bytesToUpper(v), r.headers));
}

register(uppercase);
