// as-count: the stateful count processor in AssemblyScript, behaving as the
// Go example count: it keeps a running count per record key in the
// pipeline's state (state.enabled) and emits, for each record, the key with
// its count so far (decimal). A record with a null key is counted under the
// empty key, which belongs to one partition of the input: in any other it
// fails (state key outside the record's partition).
//
// The Go example's headers for the host's tests work the same: "count.key"
// counts under that key instead of the record's, "count.pad" (a decimal n)
// stores n bytes of padding with the count, and "count.scan" (a prefix) also
// emits every key with that prefix and its stored value, in key order, after
// the count. One more, "count.delete", deletes the key's count instead of
// counting (and emits the key with "0"). A state error fails the record
// terminally. (There is no versioned build: processor.version is never set.)
//
// Build (from the repository root; see abi/sdk/assemblyscript/README.md):
//   node abi/sdk/assemblyscript/build.mjs plugins/examples/as-count/assembly/index.ts count.wasm
import {
  register, Record, Emitter, Output, Outcome, ok, stateGet, statePut, stateDelete, stateScan, StateVisitor,
} from "../../../../abi/sdk/assemblyscript/assembly/index";
export * from "../../../../abi/sdk/assemblyscript/assembly/exports";

const EMPTY = new Uint8Array(0);

function utf8(s: string): Uint8Array { return Uint8Array.wrap(String.UTF8.encode(s)); }

// The count a stored value starts with: its leading decimal digits, as Go's
// strconv.ParseUint reads them (0 when there are none, the largest u64 when
// they overflow).
function leadingCount(v: Uint8Array): u64 {
  let n: u64 = 0;
  for (let i = 0; i < v.length; i++) {
    const c = unchecked(v[i]);
    if (c < 0x30 || c > 0x39) break;
    const d = <u64>(c - 0x30);
    if (n > (u64.MAX_VALUE - d) / 10) {
      // Overflow: the rest are digits too (they are part of the number).
      return u64.MAX_VALUE;
    }
    n = n * 10 + d;
  }
  return n;
}

// A decimal header value as Go's strconv.Atoi reads it, 0 when it is not one.
function atoi(v: Uint8Array | null): i32 {
  if (v === null || v.length == 0) return 0;
  let i = 0;
  if (v[0] == 0x2b) i = 1; // "+"
  if (i == v.length) return 0;
  let n: i64 = 0;
  for (; i < v.length; i++) {
    const c = v[i];
    if (c < 0x30 || c > 0x39) return 0;
    n = n * 10 + <i64>(c - 0x30);
    if (n > 1 << 30) return 0; // far over any value bound
  }
  return <i32>n;
}

class EmitEntries extends StateVisitor {
  st: Outcome = ok();
  constructor(public out: Emitter) { super(); }
  visit(key: Uint8Array, value: Uint8Array): bool {
    this.st = this.out.emit(new Output(key.slice(), value.slice()));
    return this.st.isOk;
  }
}

function count(r: Record, out: Emitter): Outcome {
  let key = r.key;
  const kh = r.header("count.key");
  if (kh !== null) key = kh.value;
  const skey = key === null ? EMPTY : key!;
  if (r.header("count.delete") !== null) {
    const d = stateDelete(skey);
    if (!d.isOk) return d.terminal();
    return out.emit(new Output(key, utf8("0")));
  }
  const got = stateGet(skey);
  if (!got.isOk) return got.outcome().terminal();
  const n = (got.value === null ? <u64>0 : leadingCount(got.value!)) + 1;
  const val = utf8(n.toString());
  let stored = val;
  const ph = r.header("count.pad");
  if (ph !== null) {
    const pad = atoi(ph.value);
    stored = new Uint8Array(val.length + 1 + pad);
    stored.set(val);
    stored[val.length] = 0x20;
    stored.fill(0x2e, val.length + 1);
  }
  const put = statePut(skey, stored);
  if (!put.isOk) return put.terminal();
  const st = out.emit(new Output(key, val));
  if (!st.isOk) return st;
  const sh = r.header("count.scan");
  if (sh !== null) {
    const e = new EmitEntries(out);
    const sc = stateScan(sh.value === null ? EMPTY : sh.value!, e);
    if (!sc.isOk) return sc.terminal();
    return e.st;
  }
  return ok();
}

register(count);
