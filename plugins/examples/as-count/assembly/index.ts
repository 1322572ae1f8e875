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
// With the header "count.async" (any value) it is the Go example count-async
// instead: the count is read with an asynchronous state get (stateGetAsync),
// the put and the output in its continuation, and "count.scan" reads with
// stateScanAsync in batches of "count.scanbytes" bytes (default: the
// host's), one operation per batch. count-async's other headers work the
// same: "count.set" (a value) stores it under the key before the read, which
// then reads it (the record's own write); "count.abandon" starts the read and
// decides the record at once (ok, no output), so that the host cancels the
// read. ("count.pad" is the direct path's only; "count.delete" deletes on
// both.) A key the host refuses at the read's start (another partition's,
// too long, no state) fails the record terminally with the errno.
//
// Build (from the repository root; see abi/sdk/assemblyscript/README.md):
//   node abi/sdk/assemblyscript/build.mjs plugins/examples/as-count/assembly/index.ts count.wasm
import {
  register, Record, Emitter, Output, Outcome, ok, fail, stateGet, statePut, stateDelete, stateScan, StateVisitor,
  awaitOp, Then, Completion, stateGetAsync, stateScanAsync,
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

// The key counted: the record's, or the header count.key's.
function countKey(r: Record): Uint8Array | null {
  const kh = r.header("count.key");
  return kh !== null ? kh.value : r.key;
}

// count-async: the read as an operation, the rest in its continuation.
function countAsync(r: Record, skey: Uint8Array): Outcome {
  const sh = r.header("count.set");
  if (sh !== null) {
    const put = statePut(skey, sh.value === null ? EMPTY : sh.value!);
    if (!put.isOk) return put.terminal();
  }
  if (r.header("count.abandon") !== null) {
    const a = awaitOp(stateGetAsync(skey), new Ignore());
    if (!a.isPending) return a;
    return ok(); // decided while the read is outstanding: the host cancels it
  }
  return awaitOp(stateGetAsync(skey), new CountThen());
}

class Ignore extends Then {
  then(r: Record, out: Emitter, c: Completion): Outcome { return ok(); }
}

class CountThen extends Then {
  then(r: Record, out: Emitter, c: Completion): Outcome {
    if (!c.isOk) return c.failure().terminal();
    const got = c.stateValue();
    if (got === null) return fail("abi: decode state get result: malformed encoding");
    const key = countKey(r);
    const skey = key === null ? EMPTY : key!;
    const n = (got.value === null ? <u64>0 : leadingCount(got.value!)) + 1;
    const val = utf8(n.toString());
    const put = statePut(skey, val);
    if (!put.isOk) return put.terminal();
    const st = out.emit(new Output(key, val));
    if (!st.isOk) return st;
    const sh = r.header("count.scan");
    if (sh !== null) {
      const prefix = sh.value === null ? EMPTY : sh.value!;
      const size = atoi(r.header("count.scanbytes") === null ? null : r.header("count.scanbytes")!.value);
      return awaitOp(stateScanAsync(prefix, null, size), new ScanThen(prefix, size));
    }
    return ok();
  }
}

// Emits the keys with prefix, one batch per operation, until a batch is empty.
class ScanThen extends Then {
  constructor(public prefix: Uint8Array, public size: i32) { super(); }
  then(r: Record, out: Emitter, c: Completion): Outcome {
    if (!c.isOk) return c.failure().terminal();
    const b = c.stateBatch();
    if (b === null) return fail("abi: malformed state scan entries");
    if (b.done) return ok();
    for (let i = 0; i < b.entries.length; i++) {
      const e = b.entries[i];
      const st = out.emit(new Output(e.key, e.value));
      if (!st.isOk) return st;
    }
    return awaitOp(stateScanAsync(this.prefix, b.after(), this.size), new ScanThen(this.prefix, this.size));
  }
}

function count(r: Record, out: Emitter): Outcome {
  const key = countKey(r);
  const skey = key === null ? EMPTY : key!;
  if (r.header("count.delete") !== null) {
    const d = stateDelete(skey);
    if (!d.isOk) return d.terminal();
    return out.emit(new Output(key, utf8("0")));
  }
  if (r.header("count.async") !== null) return countAsync(r, skey);
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
