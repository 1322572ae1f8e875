// as-window: a count per key and one-minute tumbling window with 10 s of
// grace, emitted once the window closes, over the raw event-time bindings
// of the AssemblyScript SDK (host.ts, ABI.md §4.2): the sketch of
// docs/SDK.md, "Windows and timers", and the same processor as the C one
// (plugins/examples/c-window).
//
// A window is the two-part state entry (record key, start as 8 bytes big
// endian) → its count (8 bytes big endian), and one timer (record key, end
// + grace) that closes it: the firing emits {"start","end","count"} with
// the key and deletes the entry, so a closed window leaves nothing. A
// record whose window has closed (stream time, its own timestamp counted,
// at or past end + grace) is late and dropped. The pipeline needs
// state.enabled and ordering: partition.
//
// Build (from the repository root; see abi/sdk/assemblyscript/README.md):
//   node abi/sdk/assemblyscript/build.mjs plugins/examples/as-window/assembly/index.ts window.wasm
import { register, Record, Emitter, Output, Outcome, ok, retry, fail } from "../../../../abi/sdk/assemblyscript/assembly/index";
import * as host from "../../../../abi/sdk/assemblyscript/assembly/host";
export * from "../../../../abi/sdk/assemblyscript/assembly/exports";

const SIZE: i64 = 60000; // ms
const GRACE: i64 = 10000; // ms
const EMPTY = new Uint8Array(0);
const sub = new Uint8Array(8);
const val = new Uint8Array(8);
const now8 = new Uint8Array(8);

function putBE(b: Uint8Array, v: u64): void {
  for (let i = 7; i >= 0; i--) { b[i] = <u8>v; v >>= 8; }
}

function getBE(b: Uint8Array): u64 {
  let v: u64 = 0;
  for (let i = 0; i < 8; i++) v = (v << 8) | <u64>b[i];
  return v;
}

// A host errno as the call's outcome: a limit is retried, the rest (a key
// over 1 KiB or of another partition, no state) is dead-lettered.
function stateFailure(rc: i32): Outcome {
  return rc == -5 ? retry("window: a limit") : fail("window: state refused, errno " + (-rc).toString());
}

function process(r: Record, out: Emitter): Outcome {
  const h = out.handle;
  const key = r.key !== null ? r.key! : EMPTY;
  if (r.timestamp < 0) return fail("window: negative timestamp");
  let rc = host.stream_time(h, now8.dataStart);
  if (rc < 0) return stateFailure(rc);
  let now = load<i64>(now8.dataStart);
  if (r.timestamp > now) now = r.timestamp; // Kafka Streams' stream time counts the record
  const start = r.timestamp - r.timestamp % SIZE;
  if (start + SIZE + GRACE <= now) return ok(); // late: its window has closed
  putBE(sub, <u64>start);
  let n: u64 = 0;
  rc = host.state_get2(h, key.dataStart, <u32>key.length, sub.dataStart, 8, val.dataStart, 8);
  if (rc == 8) {
    n = getBE(val);
  } else if (rc == -8) { // a new window: its timer
    rc = host.timer_set(h, key.dataStart, <u32>key.length, start + SIZE + GRACE);
    if (rc < 0) return stateFailure(rc);
  } else {
    return rc < 0 ? stateFailure(rc) : fail("window: a count is 8 bytes");
  }
  putBE(val, n + 1);
  rc = host.state_put2(h, key.dataStart, <u32>key.length, sub.dataStart, 8, val.dataStart, 8);
  return rc < 0 ? stateFailure(rc) : ok();
}

register(process);

// The firing of a timer (ABI.md §4.2): at i64 | stream_time i64 |
// partition i32 | attempt u32 | topic (u32 length + bytes) | key (u32
// length + bytes), read with record_read like a record.
export function wasmstream_on_timer(handle: u32, len: u32): i32 {
  const buf = new Uint8Array(len);
  if (len < 32 || host.record_read(handle, buf.dataStart, len) != <i32>len) return decided(handle, fail("window: short timer firing"));
  const at = load<i64>(buf.dataStart);
  const keyAt: u64 = 28 + <u64>load<u32>(buf.dataStart + 24);
  if (keyAt > <u64>len - 4 || keyAt + 4 + <u64>load<u32>(buf.dataStart + <usize>keyAt) != <u64>len) return decided(handle, fail("window: malformed timer firing"));
  const key = buf.subarray(<i32>keyAt + 4);
  return decided(handle, fire(handle, key, at));
}

function fire(h: u32, key: Uint8Array, at: i64): Outcome {
  const start = at - GRACE - SIZE; // the window this timer closes
  putBE(sub, <u64>start);
  let rc = host.state_get2(h, key.dataStart, <u32>key.length, sub.dataStart, 8, val.dataStart, 8);
  if (rc == -8) return ok(); // no such window
  if (rc != 8) return rc < 0 ? stateFailure(rc) : fail("window: a count is 8 bytes");
  rc = host.state_delete2(h, key.dataStart, <u32>key.length, sub.dataStart, 8);
  if (rc < 0) return stateFailure(rc);
  const json = "{\"start\":" + start.toString() + ",\"end\":" + (start + SIZE).toString() + ",\"count\":" + getBE(val).toString() + "}";
  return new Emitter(h).emit(new Output(key, Uint8Array.wrap(String.UTF8.encode(json))));
}

// The status of a firing's outcome, its message set when it failed.
function decided(handle: u32, o: Outcome): i32 {
  if (!o.isOk) {
    const m = String.UTF8.encode(o.message);
    host.set_error(handle, changetype<usize>(m), <u32>m.byteLength);
  }
  return o.status;
}
