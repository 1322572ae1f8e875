// as-dedup: the stateful dedup processor in AssemblyScript, behaving as the
// Go example dedup: it emits the first record of each id and drops
// (succeeds without output) every later one. The id is the record's key —
// produce with the id as key, so that every copy of a record lands in the
// same partition and its state. The state keeps one empty value per id
// seen. A state error fails the record terminally.
//
// Build (from the repository root; see abi/sdk/assemblyscript/README.md):
//   node abi/sdk/assemblyscript/build.mjs plugins/examples/as-dedup/assembly/index.ts dedup.wasm
import { register, Record, Emitter, Output, Outcome, ok, stateGet, statePut } from "../../../../abi/sdk/assemblyscript/assembly/index";
export * from "../../../../abi/sdk/assemblyscript/assembly/exports";

const EMPTY = new Uint8Array(0);

function dedup(r: Record, out: Emitter): Outcome {
  const id = r.key === null ? EMPTY : r.key!;
  const seen = stateGet(id);
  if (!seen.isOk) return seen.outcome().terminal();
  if (seen.found) return ok();
  const put = statePut(id, EMPTY);
  if (!put.isOk) return put.terminal();
  return out.emit(new Output(r.key, r.value, r.headers));
}

register(dedup);
