// The wasmstream SDK for AssemblyScript (ABI v1, abi/ABI.md).
//
// A processor is a function from a record and an emitter to an Outcome,
// registered once at module start:
//
//   import { register, Record, Emitter, Output, Outcome } from "<sdk>/assembly/index";
//   export * from "<sdk>/assembly/exports";
//   register((r: Record, out: Emitter): Outcome => out.emit(new Output(r.key, r.value, r.headers)));
//
// AssemblyScript has no exceptions, so outcomes are values: ok(),
// retry(message) (a retryable failure), fail(message) (terminal: the record
// goes to the dead-letter topic), or what awaitOp returned (pending).

import * as host from "./host";
import { setAbortHandle } from "./abort";
import { Header, Reader, Writer } from "./encoding";
export { Header, Reader, Writer } from "./encoding";
export { bytesToUpper, bytesContains } from "./bytes";
export { jsonField, JsonValue, JSON_MAX_DEPTH } from "./json";

/** ABI statuses (ABI.md §3). */
export const enum Status { OK = 0, PENDING = 1, RETRY = 2, FAIL = 3 }

/** Host errnos (ABI.md §4), as the positive number. */
export namespace Errno {
  export const BAD_HANDLE: i32 = 1;
  export const BUFFER_TOO_SMALL: i32 = 2;
  export const BAD_ENCODING: i32 = 3;
  export const TOPIC_DENIED: i32 = 4;
  export const LIMIT: i32 = 5;
  export const NOT_SUPPORTED: i32 = 6;
  export const BAD_OPERATION: i32 = 7;
  /** state_get: the key has no value (stateGet returns a result that is not found). */
  export const NOT_FOUND: i32 = 8;
  /** state_*: the key is over MAX_STATE_KEY_BYTES (a scan's prefix too) or the value over state.max_value_bytes. */
  export const TOO_LARGE: i32 = 9;
  /** state_*: the key belongs to another input partition than the record's. */
  export const WRONG_KEY: i32 = 10;
  /** state_*: the pipeline has no state (state.enabled is off). */
  export const NO_STATE: i32 = 11;
}

// The state errnos' names are the Go SDK's (abi.Errno), as the host's
// dead-letter errors and the other SDKs name them.
const errnoNames: string[] = ["", "bad handle", "buffer too small", "bad encoding", "topic denied", "limit", "not supported", "bad operation",
  "state key not found", "state key or value too large", "state key outside the record's partition", "state not enabled for this pipeline"];

/** The errno's name (`errno` positive, as in Outcome.errno). */
export function errnoString(e: i32): string {
  return e > 0 && e < errnoNames.length ? "abi: " + errnoNames[e] : "abi: errno " + e.toString();
}

/** Log levels of log(). */
export namespace Level {
  export const DEBUG: i32 = 0;
  export const INFO: i32 = 1;
  export const WARN: i32 = 2;
  export const ERROR: i32 = 3;
}

/** How a record (or one call for it) ended: returned by the processor and continuations. */
export class Outcome {
  constructor(public status: i32, public message: string = "", public errno: i32 = 0) {}
  get isOk(): bool { return this.status == Status.OK; }
  get isPending(): bool { return this.status == Status.PENDING; }
  /** A retryable failure or a pending one: the same message, now terminal. */
  terminal(): Outcome { return this.status == Status.RETRY ? new Outcome(Status.FAIL, this.message, this.errno) : this; }
}

const OK = new Outcome(Status.OK);
const PENDING = new Outcome(Status.PENDING);

/** Success: what the record emitted is released to Kafka. */
export function ok(): Outcome { return OK; }
/** A retryable failure: outputs are discarded and the record may be retried. */
export function retry(message: string): Outcome { return new Outcome(Status.RETRY, message); }
/** A terminal failure: outputs are discarded; the record goes to the dead-letter topic. */
export function fail(message: string): Outcome { return new Outcome(Status.FAIL, message); }
/** Keep waiting on operations this record started (from a continuation, when another one decides). */
export function pending(): Outcome { return PENDING; }

/** The record being processed. Key, value and header values are views valid until the record is decided. */
export class Record {
  topic: string = "";
  partition: i32 = 0;
  offset: i64 = 0;
  /** Milliseconds since the Unix epoch. */
  timestamp: i64 = 0;
  /** 1 on the first attempt, counting up on each retry. */
  attempt: u32 = 1;
  key: Uint8Array | null = null;
  value: Uint8Array | null = null;
  headers: Header[] = [];

  /** The first header named key, or null. */
  header(key: string): Header | null {
    const hs = this.headers;
    for (let i = 0; i < hs.length; i++) {
      if (unchecked(hs[i]).key == key) return unchecked(hs[i]);
    }
    return null;
  }

  /** "<topic>/<partition>/<offset>" where the record was first consumed: the same on every attempt (ABI.md §7.4). */
  idempotencyKey(): string {
    return this.topic + "/" + this.partition.toString() + "/" + this.offset.toString();
  }
}

/** An output record. An empty topic is the pipeline's output topic; partition -1 lets the host partition by key. */
export class Output {
  topic: string = "";
  partition: i32 = -1;
  constructor(public key: Uint8Array | null = null, public value: Uint8Array | null = null, public headers: Header[] | null = null) {}
  withTopic(t: string): Output { this.topic = t; return this; }
  withPartition(p: i32): Output { this.partition = p; return this; }
}

/** Encodes an output (ABI.md §5.2) into w. */
export function encodeOutput(w: Writer, o: Output): void {
  w.str(o.topic);
  w.u32(<u32>o.partition);
  w.bytes(o.key);
  w.bytes(o.value);
  w.headers(o.headers);
}

/** Decodes a record (ABI.md §5.1) from b into r; returns an error message, or null. Key, value and header values are views of b. */
export function decodeRecord(b: Uint8Array, r: Record): string | null {
  return decodeRecordN(b, b.length, r);
}

const recReader = new Reader(new Uint8Array(0));

// decodeRecord of b[0:n], with the SDK's reused Reader.
function decodeRecordN(b: Uint8Array, n: i32, r: Record): string | null {
  const d = recReader.reset(b, n);
  r.offset = <i64>d.u64();
  r.timestamp = <i64>d.u64();
  r.partition = <i32>d.u32();
  r.attempt = d.u32();
  // The topic is decoded once while records come from one topic.
  const tn = d.u32();
  if (tn <= <u32>i32.MAX_VALUE && d.need(<i32>tn)) {
    const p = b.dataStart + d.off;
    if (lastTopicBytes.length != <i32>tn || memory.compare(p, lastTopicBytes.dataStart, <usize>tn) != 0) {
      lastTopic = String.UTF8.decodeUnsafe(p, <usize>tn);
      lastTopicBytes = b.slice(d.off, d.off + <i32>tn);
    }
    r.topic = lastTopic;
    d.off += <i32>tn;
  } else if (d.err === null) {
    d.err = "string length " + tn.toString();
  }
  r.key = d.bytes();
  r.value = d.bytes();
  r.headers = d.headersInto(r.headers);
  return d.finish("record");
}

let lastTopic: string = "";
let lastTopicBytes: Uint8Array = new Uint8Array(0);

const outW = new Writer(1024);

/**
 * Takes a record's outputs; they are held by the host and produced only if the record succeeds.
 *
 * In a batch call (ABI.md §10) a record's outputs are handed to the host in
 * one list with its outcome, so emit cannot report the host's refusal at
 * once: an output the host refuses (a denied topic, a limit) fails the
 * record when it ends instead (retryably for a limit, terminally for a
 * denied topic), even if the processor ignored the Outcome. Past 64 outputs
 * (or 64 KiB) in a record they go to the host one by one, and emit returns
 * the refusal as in a call of its own.
 */
export class Emitter {
  constructor(public handle: u32) {}
  /** Emits o (copied at once). Returns ok(), or a retryable Outcome naming the errno (a denied topic or a bad encoding is terminal). */
  emit(o: Output): Outcome {
    if (this.handle == batchHandle && this.handle != 0 && !batchDirect) return listOutput(this.handle, o);
    encodeOutput(outW.reset(), o);
    return emitted(host.emit(this.handle, outW.ptr, <u32>outW.len));
  }
}

// The Outcome of an emit that returned rc.
function emitted(rc: i32): Outcome {
  if (rc < 0) {
    const e = -rc;
    const st = e == Errno.TOPIC_DENIED || e == Errno.BAD_ENCODING ? Status.FAIL : Status.RETRY;
    return new Outcome(st, "emit: " + errnoString(e), e);
  }
  return OK;
}

// ---- the batch entry (ABI.md §10) ----

// The batch's record in progress; 0 outside batches.
let batchHandle: u32 = 0;
// Its output list (each output a u32 length and its encoding), handed to
// the host with its status by record_next; reused across records.
const listW = new Writer(1024);
// The outputs in the list.
let listN: i32 = 0;
// The record's outputs go to the host one by one (emit).
let batchDirect = false;
// A record's list holds at most this many outputs and bytes; past them its
// outputs are emitted one by one, so that a processor that emits until emit
// fails stops at the host's limit as it would alone.
const LIST_MAX_OUTPUTS: i32 = 64;
const LIST_MAX_BYTES: i32 = 64 << 10;
// The headers the host decodes in an output (abi.MaxHeaders).
const MAX_HEADERS: i32 = 1000;

// Adds o to the record's output list. The host checks the list when the
// record ends: an output it refuses fails the record then.
function listOutput(handle: u32, o: Output): Outcome {
  const hs = o.headers;
  if (o.partition < -1 || (hs !== null && hs.length > MAX_HEADERS)) {
    // What emit refuses by the output alone, refused at once.
    return new Outcome(Status.FAIL, "emit: " + errnoString(Errno.BAD_ENCODING), Errno.BAD_ENCODING);
  }
  const at = listW.len;
  listW.u32(0);
  encodeOutput(listW, o);
  store<u32>(listW.ptr + <usize>at, <u32>(listW.len - at - 4)); // ptr after the encoding: the buffer may have grown
  if (++listN < LIST_MAX_OUTPUTS && listW.len < LIST_MAX_BYTES) return OK;
  // Many outputs: from here on they go to the host one by one, in order,
  // so that emit returns a limit when the host refuses.
  batchDirect = true;
  return emitList(handle);
}

// Emits the outputs of the list one by one and empties it; after one the
// host refuses, the rest is dropped (as after a refused emit).
function emitList(handle: u32): Outcome {
  const p = listW.ptr, n = listW.len;
  listW.reset();
  let off = 0;
  while (n - off >= 4) {
    const m = <i32>load<u32>(p + <usize>off);
    const rc = host.emit(handle, p + <usize>off + 4, <u32>m);
    if (rc < 0) return emitted(rc);
    off += 4 + m;
  }
  return OK;
}

/** A processing function. Top-level functions only: AssemblyScript has no closures. */
export type Processor = (r: Record, out: Emitter) => Outcome;

let processor: Processor | null = null;

/** Registers fn as the module's processor. Call it once, at the top level of the entry file. */
export function register(fn: Processor): void {
  if (processor !== null) { log(Level.ERROR, "wasmstream: register called twice"); unreachable(); }
  processor = fn;
}

/** Writes msg to the host's log at level (Level.DEBUG … Level.ERROR). */
export function log(level: i32, msg: string): void {
  const b = String.UTF8.encode(msg);
  host.log(level, changetype<usize>(b), <u32>b.byteLength);
}

let envCache: Map<string, string> | null = null;

/** The environment variable name (the pipeline's env), or null. */
export function getenv(name: string): string | null {
  let env = envCache;
  if (env === null) {
    env = new Map<string, string>();
    const sizes = new ArrayBuffer(8);
    const sp = changetype<usize>(sizes);
    if (host.environ_sizes_get(sp, sp + 4) == 0) {
      const count = load<u32>(sp), size = load<u32>(sp + 4);
      const ptrs = new ArrayBuffer(<i32>count * 4 + 4);
      const buf = new ArrayBuffer(<i32>size + 1);
      if (host.environ_get(changetype<usize>(ptrs), changetype<usize>(buf)) == 0) {
        for (let i: u32 = 0; i < count; i++) {
          const p = load<u32>(changetype<usize>(ptrs) + (<usize>i << 2));
          let e = <usize>p;
          while (load<u8>(e) != 0) e++;
          const kv = String.UTF8.decodeUnsafe(<usize>p, e - <usize>p);
          const eq = kv.indexOf("=");
          if (eq > 0 && !env.has(kv.substring(0, eq))) env.set(kv.substring(0, eq), kv.substring(eq + 1));
        }
      }
    }
    envCache = env;
  }
  return env.has(name) ? env.get(name) : null;
}

// ---- asynchronous operations (ABI.md §7) ----

/** Operation kinds. */
export namespace OpKind {
  export const TIMER: i32 = 1;
  export const HTTP: i32 = 2;
  /** A state get (ABI.md §7.3): stateGetAsync. */
  export const STATE_GET: i32 = 3;
  /** A batch of a state scan (ABI.md §7.3): stateScanAsync. */
  export const STATE_SCAN: i32 = 4;
}

/** Completion codes (ABI.md §7.2). */
export namespace Code {
  export const OK: u8 = 0;
  export const ERROR: u8 = 1;
  export const CANCELED: u8 = 2;
  export const REFUSED: u8 = 3;
}

/** An operation to start: its kind and encoded request. */
export class Op {
  constructor(public kind: i32, public req: Uint8Array) {}
  get name(): string {
    switch (this.kind) {
      case OpKind.TIMER: return "timer";
      case OpKind.HTTP: return "http";
      case OpKind.STATE_GET: return "state_get";
      case OpKind.STATE_SCAN: return "state_scan";
    }
    return "unknown";
  }
}

/** An HTTP request; the host must be in the pipeline's async.http.allow_hosts. */
export class HTTPRequest {
  method: string = "";
  url: string = "";
  headers: Header[] = [];
  body: Uint8Array | null = null;
  /** 0: the pipeline's timeout; a longer one is cut to it. */
  timeoutMs: u32 = 0;
}

/** Encodes an HTTP request (ABI.md §7.3). */
export function encodeHTTPRequest(w: Writer, r: HTTPRequest): void {
  w.str(r.method);
  w.str(r.url);
  w.headers(r.headers);
  w.bytes(r.body);
  w.u32(r.timeoutMs);
}

/** The operation of an HTTP request. */
export function http(r: HTTPRequest): Op {
  const w = new Writer(64);
  encodeHTTPRequest(w, r);
  return new Op(OpKind.HTTP, w.toBytes());
}

/** The operation of a GET of url. */
export function get(url: string): Op {
  const r = new HTTPRequest();
  r.method = "GET";
  r.url = url;
  return http(r);
}

/** The operation of a timer of ms milliseconds. */
export function timer(ms: u64): Op {
  const w = new Writer(8);
  w.u64(ms * 1000000);
  return new Op(OpKind.TIMER, w.toBytes());
}

/** An HTTP response, whatever its status code. */
export class HTTPResponse {
  status: i32 = 0;
  headers: Header[] = [];
  body: Uint8Array | null = null;
  /** The first value of the header named key (canonical form, e.g. "Content-Type"), or null. */
  header(key: string): string | null {
    for (let i = 0; i < this.headers.length; i++) {
      const h = unchecked(this.headers[i]);
      if (h.key == key) { const v = h.value; return v === null ? "" : String.UTF8.decode(v.buffer.slice(v.byteOffset, v.byteOffset + v.length)); }
    }
    return null;
  }
}

/** Decodes an HTTP response payload; null and `err` set when malformed. */
export function decodeHTTPResponse(b: Uint8Array): HTTPResponse | null {
  const d = new Reader(b);
  const r = new HTTPResponse();
  r.status = <i32>d.u32();
  r.headers = d.headers();
  r.body = d.bytes();
  return d.finish("http response") === null ? r : null;
}

/** The result of an operation. */
export class Completion {
  /** Code.OK, ERROR, CANCELED or REFUSED. */
  code: u8 = 0;
  /** The failure's message (code != OK). */
  message: string = "";
  /** The kind-specific payload (code == OK). */
  payload: Uint8Array = new Uint8Array(0);
  op: Op | null = null;
  get isOk(): bool { return this.code == Code.OK; }
  /** Refused by the host's policy (allow list, a limit): retrying will not help. */
  get refused(): bool { return this.code == Code.REFUSED; }
  /** The HTTP response of an OK HTTP operation, or null. */
  http(): HTTPResponse | null { return this.code == Code.OK ? decodeHTTPResponse(this.payload) : null; }
  /** The value of an OK state get (stateGetAsync): found or not; null when the result is not OK or malformed. */
  stateValue(): StateValue | null { return this.code == Code.OK ? decodeStateGetResult(this.payload) : null; }
  /** The batch of an OK state scan (stateScanAsync); null when the result is not OK or malformed. */
  stateBatch(): StateBatch | null { return this.code == Code.OK ? decodeStateBatch(this.payload) : null; }
  /** A failed operation as an outcome: a refusal is terminal, anything else retryable. */
  failure(): Outcome { return new Outcome(this.code == Code.REFUSED ? Status.FAIL : Status.RETRY, this.message); }
}

/** Decodes a completion (ABI.md §7.2); returns an error message, or null. */
export function decodeCompletion(b: Uint8Array, c: Completion): string | null {
  const d = new Reader(b);
  c.code = d.u8();
  if (d.err === null) {
    if (c.code == Code.OK) {
      c.payload = b.subarray(1);
      d.off = b.length;
    } else if (c.code <= Code.REFUSED) {
      c.message = d.str();
    } else {
      d.err = "completion code " + c.code.toString();
    }
  }
  return d.finish("completion");
}

/**
 * The continuation of an operation: subclass it, keep the record's state in
 * fields (AssemblyScript has no closures) and override then(). then() runs
 * when the operation completes, with the record and emitter still valid, and
 * returns what decides the record: ok(), retry(), fail(), another
 * awaitOp(), or pending() to keep waiting on other operations.
 */
export abstract class Then {
  abstract then(r: Record, out: Emitter, c: Completion): Outcome;
}

class PendingOp {
  constructor(public id: u32, public op: Op, public cont: Then) {}
}

class PendingCall {
  ops: PendingOp[] = [];
  constructor(public rec: Record, public out: Emitter, public buf: Uint8Array) {}
}

let curHandle: u32 = 0;
let curRec: Record | null = null;
let curBuf: Uint8Array | null = null;
let curOut: Emitter | null = null;
const calls = new Map<u32, PendingCall>();

/**
 * Starts op for the record being processed and returns pending(), which the
 * processor (or a continuation) returns; cont.then runs when op completes.
 * If op cannot be started, returns why instead (cont never runs).
 */
export function awaitOp(op: Op, cont: Then): Outcome {
  if (curHandle == 0) return fail("wasmstream: awaitOp called outside a record's processing");
  const rc = host.async_start(curHandle, op.kind, op.req.dataStart, <u32>op.req.length);
  if (rc < 0) {
    const e = -rc;
    // A request the host refuses whatever the attempt (malformed, an unknown
    // kind, a state key refused) is terminal, as in the Go SDK's Await.
    const terminal = e == Errno.BAD_ENCODING || e == Errno.NOT_SUPPORTED || e == Errno.TOO_LARGE || e == Errno.WRONG_KEY || e == Errno.NO_STATE;
    return new Outcome(terminal ? Status.FAIL : Status.RETRY, "wasmstream: start " + op.name + " operation: " + errnoString(e), e);
  }
  let pc: PendingCall;
  if (calls.has(curHandle)) {
    pc = calls.get(curHandle);
  } else {
    pc = new PendingCall(changetype<Record>(curRec), changetype<Emitter>(curOut), changetype<Uint8Array>(curBuf));
    calls.set(curHandle, pc);
  }
  pc.ops.push(new PendingOp(<u32>rc, op, cont));
  return PENDING;
}

function setError(handle: u32, msg: string): void {
  const b = String.UTF8.encode(msg);
  host.set_error(handle, changetype<usize>(b), <u32>b.byteLength);
}

function decide(handle: u32, o: Outcome): i32 {
  if (o.status == Status.PENDING) {
    if (calls.has(handle) && calls.get(handle).ops.length > 0) return Status.PENDING;
    o = fail("wasmstream: returned pending, but no asynchronous operation is outstanding");
  }
  if (calls.size > 0 && calls.has(handle)) calls.delete(handle); // the host cancels what is outstanding
  if (o.status != Status.OK) {
    setError(handle, o.message);
    if (o.status != Status.RETRY && o.status != Status.FAIL) return Status.FAIL;
  }
  return o.status;
}

// ---- state (ABI.md §4.1) ----
//
// A pipeline with state.enabled gives its processor a key-value store per
// input partition. Call these only while processing a record (in the
// processor or a continuation): the state is the record's input
// partition's, and a key must be one the input's partitioner sends to that
// partition — the record's own key, or keys the producer also partitions by
// (else Errno.WRONG_KEY). A write is the record's until its outcome: if the
// record fails, its writes are discarded with its outputs; later records of
// the same partition see it at once. Failures are Outcomes naming the errno
// (retryable; .terminal() to dead-letter the record): Errno.TOO_LARGE (a
// key over MAX_STATE_KEY_BYTES or a value over state.max_value_bytes),
// Errno.WRONG_KEY, Errno.NO_STATE (the pipeline has no state),
// Errno.BAD_HANDLE (called outside a record's call).

/** The largest state key (and scan prefix), in bytes. */
export const MAX_STATE_KEY_BYTES: i32 = 1024;

/** What stateGet found: a value (found), none (not found, no error) or a failure. */
export class StateValue {
  constructor(public value: Uint8Array | null, public errno: i32 = 0) {}
  /** The call succeeded (whether or not the key has a value). */
  get isOk(): bool { return this.errno == 0; }
  /** The key has a value (an empty value is a value). */
  get found(): bool { return this.errno == 0 && this.value !== null; }
  /** ok(), or the failure as a retryable Outcome naming the errno. */
  outcome(): Outcome { return this.errno == 0 ? OK : stateFailure("state_get", this.errno); }
}

function stateFailure(call: string, e: i32): Outcome {
  return new Outcome(Status.RETRY, call + ": " + errnoString(e), e);
}

function stateBytes(b: Uint8Array | null): usize { return b === null ? 0 : b.dataStart; }
function stateLen(b: Uint8Array | null): u32 { return b === null ? 0 : <u32>b.length; }

let stateGetBuf = new Uint8Array(1024);

/** key's value (a copy, the caller's): found, not found, or the failure. */
export function stateGet(key: Uint8Array): StateValue {
  if (curHandle == 0) return new StateValue(null, Errno.BAD_HANDLE);
  let rc = host.state_get(curHandle, key.dataStart, <u32>key.length, stateGetBuf.dataStart, <u32>stateGetBuf.length);
  while (rc > stateGetBuf.length) {
    stateGetBuf = new Uint8Array(rc); // the value is larger: ask again with its size
    rc = host.state_get(curHandle, key.dataStart, <u32>key.length, stateGetBuf.dataStart, <u32>stateGetBuf.length);
  }
  if (rc == -Errno.NOT_FOUND) return new StateValue(null);
  if (rc < 0) return new StateValue(null, -rc);
  return new StateValue(stateGetBuf.slice(0, rc));
}

/** Sets key to value for the record. Returns ok() or the failure. */
export function statePut(key: Uint8Array, value: Uint8Array | null): Outcome {
  if (curHandle == 0) return stateFailure("state_put", Errno.BAD_HANDLE);
  const rc = host.state_put(curHandle, key.dataStart, <u32>key.length, stateBytes(value), stateLen(value));
  return rc < 0 ? stateFailure("state_put", -rc) : OK;
}

/** Removes key for the record. Returns ok() or the failure. */
export function stateDelete(key: Uint8Array): Outcome {
  if (curHandle == 0) return stateFailure("state_delete", Errno.BAD_HANDLE);
  const rc = host.state_delete(curHandle, key.dataStart, <u32>key.length);
  return rc < 0 ? stateFailure("state_delete", -rc) : OK;
}

/**
 * What stateScan calls for each entry: subclass it, keep what the scan needs
 * in fields (AssemblyScript has no closures) and override visit(). key and
 * value are views valid only during visit (copy them with slice() to keep
 * them); return false to stop the scan.
 */
export abstract class StateVisitor {
  abstract visit(key: Uint8Array, value: Uint8Array): bool;
}

let stateScanBuf: Uint8Array | null = null;
const SCAN_BUF: i32 = 64 << 10;
const MAX_SCAN_BUF: i32 = 8 << 20;

/**
 * Calls v.visit with every key that starts with prefix and its value, in
 * key order (bytewise), until visit returns false. The host hands the
 * entries over in bounded batches (a large scan takes several host calls);
 * the record's own writes are included, and a write during the scan may or
 * may not be seen by it. Returns ok() or the failure (Errno.BAD_ENCODING if
 * the host's batch is malformed).
 */
export function stateScan(prefix: Uint8Array, v: StateVisitor): Outcome {
  if (curHandle == 0) return stateFailure("state_scan", Errno.BAD_HANDLE);
  // The buffer is the scan's while it runs: visit may scan too (with a new one).
  let buf = stateScanBuf;
  stateScanBuf = null;
  if (buf === null) buf = new Uint8Array(SCAN_BUF);
  let after = new Uint8Array(0);
  let res = OK;
  for (;;) {
    const rc = host.state_scan(curHandle, prefix.dataStart, <u32>prefix.length, after.dataStart, <u32>after.length, buf.dataStart, <u32>buf.length);
    if (rc == -Errno.BUFFER_TOO_SMALL && buf.length < MAX_SCAN_BUF) { buf = new Uint8Array(buf.length * 2); continue; }
    if (rc < 0) { res = stateFailure("state_scan", -rc); break; }
    if (rc == 0) break;
    if (rc > buf.length) { res = stateFailure("state_scan", Errno.BAD_ENCODING); break; }
    let off = 0;
    let lastOff = 0, lastLen = 0;
    let stop = false, bad = false;
    while (off < rc) {
      if (rc - off < 4) { bad = true; break; }
      const kn = load<u32>(buf.dataStart + <usize>off);
      if (kn > <u32>(rc - off - 4)) { bad = true; break; }
      const ko = off + 4;
      off = ko + <i32>kn;
      if (rc - off < 4) { bad = true; break; }
      const vn = load<u32>(buf.dataStart + <usize>off);
      if (vn > <u32>(rc - off - 4)) { bad = true; break; }
      const vo = off + 4;
      off = vo + <i32>vn;
      lastOff = ko; lastLen = <i32>kn;
      if (!v.visit(buf.subarray(ko, ko + <i32>kn), buf.subarray(vo, vo + <i32>vn))) { stop = true; break; }
    }
    if (bad) { res = stateFailure("state_scan", Errno.BAD_ENCODING); break; }
    if (stop) break;
    after = buf.slice(lastOff, lastOff + lastLen);
  }
  stateScanBuf = buf;
  return res;
}

// ---- asynchronous state reads (ABI.md §7.3) ----
//
// stateGet and stateScan as operations for awaitOp, so that the instance
// takes other records while the host reads the state (a read may wait on
// the disk). A read sees the record's own writes made before awaitOp, and
// the partition's state as it is when the host performs the read: under
// ordering key, every write of the key's earlier records; under ordering
// partition, a record still waiting may not have written yet (ABI.md
// §4.1). A request the host refuses at once (a key, prefix or cursor over
// MAX_STATE_KEY_BYTES: Errno.TOO_LARGE; a key of another partition:
// Errno.WRONG_KEY; no state: Errno.NO_STATE; malformed: Errno.BAD_ENCODING)
// makes awaitOp return a terminal Outcome naming the errno (as the Go SDK's
// Await does); the continuation never runs. A read that fails when it runs
// (the partition moved to another host) completes with Code.ERROR.

/** The bound of a scan batch when stateScanAsync is given 0. */
export const STATE_SCAN_DEFAULT_BYTES: i32 = 64 << 10;
/** The largest bound of a scan batch: a larger one is cut to it. */
export const STATE_SCAN_MAX_BYTES: i32 = 1 << 20;

/** The operation of a state get of key; its continuation reads c.stateValue(). Keys as stateGet. */
export function stateGetAsync(key: Uint8Array): Op {
  const w = new Writer(4 + key.length);
  w.bytes(key); // a string: u32 length + bytes
  return new Op(OpKind.STATE_GET, w.toBytes());
}

/**
 * The operation of the next batch of the keys with prefix that sort after
 * `after` (from the first when it is empty): as many whole entries as fit
 * in maxBytes (0: STATE_SCAN_DEFAULT_BYTES; at most STATE_SCAN_MAX_BYTES),
 * at least one. Its continuation reads c.stateBatch(); to go on, start it
 * again with after = batch.after(), until a batch is done. Each batch is a
 * read of its own: a key written between two batches is seen if it sorts
 * after the cursor.
 */
export function stateScanAsync(prefix: Uint8Array, after: Uint8Array | null, maxBytes: i32): Op {
  const a = after === null ? new Uint8Array(0) : after;
  const w = new Writer(12 + prefix.length + a.length);
  w.bytes(prefix);
  w.bytes(a);
  w.u32(<u32>(maxBytes < 0 ? 0 : maxBytes > STATE_SCAN_MAX_BYTES ? STATE_SCAN_MAX_BYTES : maxBytes));
  return new Op(OpKind.STATE_SCAN, w.toBytes());
}

/** Decodes the payload of a completed state get: a StateValue (found or not), or null when malformed. The value is a view of b. */
export function decodeStateGetResult(b: Uint8Array): StateValue | null {
  const d = new Reader(b);
  const v = d.bytes();
  return d.finish("state get result") === null ? new StateValue(v) : null;
}

/** A key and its value. */
export class StateEntry {
  constructor(public key: Uint8Array, public value: Uint8Array) {}
}

/** The result of stateScanAsync: the next keys of the scan, in key order. No entries means no more keys. */
export class StateBatch {
  entries: StateEntry[] = [];
  /** Whether the scan is over (the batch has no entries). */
  get done(): bool { return this.entries.length == 0; }
  /** The cursor of the next batch: the last key of this one (empty when the batch is). */
  after(): Uint8Array { return this.entries.length == 0 ? new Uint8Array(0) : this.entries[this.entries.length - 1].key; }
}

/** Decodes the payload of a completed state scan (entries `key_len u32 | key | value_len u32 | value`), or null when malformed. Keys and values are views of b. */
export function decodeStateBatch(b: Uint8Array): StateBatch | null {
  const batch = new StateBatch();
  const n = b.length;
  let off = 0;
  while (off < n) {
    if (n - off < 4) return null;
    const kn = load<u32>(b.dataStart + <usize>off);
    if (kn > <u32>(n - off - 4)) return null;
    const ko = off + 4;
    off = ko + <i32>kn;
    if (n - off < 4) return null;
    const vn = load<u32>(b.dataStart + <usize>off);
    if (vn > <u32>(n - off - 4)) return null;
    const vo = off + 4;
    off = vo + <i32>vn;
    batch.entries.push(new StateEntry(b.subarray(ko, ko + <i32>kn), b.subarray(vo, vo + <i32>vn)));
  }
  return batch;
}

// ---- the exports (re-exported by the entry file from ./exports) ----

let inBuf = new Uint8Array(4096);
// Reused across records; a record that goes pending keeps it (a
// continuation object may hold it) and the next record gets a new one.
let emitter = new Emitter(0);
let rec = new Record();

const NO_PROCESSOR = "wasmstream: no processor registered (call register() at the top level)";

export function onRecord(handle: u32, n: u32): i32 {
  const fn = processor;
  if (fn === null) {
    setError(handle, NO_PROCESSOR);
    return Status.FAIL;
  }
  if (<u32>inBuf.length < n) inBuf = new Uint8Array(<i32>n);
  const rc = host.record_read(handle, inBuf.dataStart, n);
  if (rc < 0) {
    setError(handle, "record_read: " + errnoString(-rc));
    return Status.FAIL;
  }
  return runRecord(fn, handle, <i32>n);
}

// Decodes the record handle from inBuf[0:n], runs fn on it and decides it.
function runRecord(fn: Processor, handle: u32, n: i32): i32 {
  const err = decodeRecordN(inBuf, n, rec);
  if (err !== null) {
    setError(handle, err);
    return Status.FAIL;
  }
  curHandle = handle; curRec = rec; curBuf = inBuf; setAbortHandle(handle);
  emitter.handle = handle;
  curOut = emitter;
  const o = fn(rec, emitter);
  curHandle = 0; curRec = null; curBuf = null; curOut = null; setAbortHandle(0);
  const st = decide(handle, o);
  if (st == Status.PENDING) {
    // The waiting record keeps its buffer and Record; the next gets new ones.
    inBuf = new Uint8Array(4096);
    rec = new Record();
    emitter = new Emitter(0);
  }
  return st;
}

// Ends the record in progress with status through pull (record_next or
// completion_next, which also begins the next, writing it at buf), handing
// over its output list unless it failed (its outputs are discarded with
// it), and empties the list for the next record. Returns what pull returned.
function handOver(status: i32, pull: (status: i32, out: usize, outLen: u32, buf: usize, bufLen: u32) => i32, buf: usize, bufLen: u32): i32 {
  if (status != Status.OK && status != Status.PENDING) listW.reset();
  const n = pull(status, listW.ptr, <u32>listW.len, buf, bufLen);
  listW.reset();
  listN = 0;
  batchDirect = false;
  return n;
}

/**
 * The batch entry (ABI.md §10): takes the batch's records one by one with
 * record_next, handing over each one's status and output list, and runs the
 * processor on each as onRecord would. Handles are first, first + 1, ...;
 * maxLen is the longest record's encoding.
 */
export function onBatch(first: u32, count: u32, maxLen: u32): i32 {
  let status: i32 = Status.OK;
  let handle = first - 1;
  for (;;) {
    // A new buffer only after a record that went pending (it kept its own).
    if (<u32>inBuf.length < maxLen) inBuf = new Uint8Array(<i32>maxLen);
    const n = handOver(status, host.record_next, inBuf.dataStart, <u32>inBuf.length);
    if (n <= 0) return 0;
    handle++;
    if (n > inBuf.length) {
      inBuf = new Uint8Array(n);
      const rc = host.record_read(handle, inBuf.dataStart, <u32>n);
      if (rc < 0) {
        setError(handle, "record_read: " + errnoString(-rc));
        status = Status.FAIL;
        continue;
      }
    }
    const fn = processor;
    if (fn !== null) {
      batchHandle = handle;
      status = runRecord(fn, handle, n);
      batchHandle = 0;
    } else {
      setError(handle, NO_PROCESSOR);
      status = Status.FAIL;
    }
  }
  return 0;
}

export function onComplete(handle: u32, op: u32, n: u32): i32 {
  const buf = new Uint8Array(<i32>n); // the continuation may keep what it decodes
  const rc = host.result_read(op, buf.dataStart, n);
  if (rc < 0) {
    setError(handle, "result_read: " + errnoString(-rc));
    return Status.FAIL;
  }
  return complete(handle, op, buf);
}

// ---- the completions entry (ABI.md §10.1) ----

// The length of the header completion_next writes before a result: handle,
// op and the result's length, each a little-endian u32.
const COMPLETION_HEADER: i32 = 12;
// Where completion_next writes a completion; reused across completions.
let compBuf = new Uint8Array(4096);

/**
 * The completions entry (ABI.md §10.1): takes the queued completions one by
 * one with completion_next, handing over each one's record status and
 * output list, and delivers each as onComplete would. maxLen is the longest
 * header and result.
 */
export function onCompletions(count: u32, maxLen: u32): i32 {
  let status: i32 = Status.OK;
  if (<u32>compBuf.length < maxLen) compBuf = new Uint8Array(<i32>maxLen);
  for (;;) {
    const n = handOver(status, host.completion_next, compBuf.dataStart, <u32>compBuf.length);
    if (n <= 0) return 0;
    const p = compBuf.dataStart;
    const handle = load<u32>(p), op = load<u32>(p + 4), size = load<u32>(p + 8);
    let buf: Uint8Array;
    if (n <= compBuf.length) {
      buf = compBuf.slice(COMPLETION_HEADER, n); // a copy: the continuation may keep what it decodes
    } else {
      buf = new Uint8Array(<i32>size);
      const rc = host.result_read(op, buf.dataStart, size);
      if (rc < 0) {
        setError(handle, "result_read: " + errnoString(-rc));
        status = Status.FAIL;
        continue;
      }
    }
    batchHandle = handle;
    status = complete(handle, op, buf);
    batchHandle = 0;
  }
  return 0;
}

// Delivers the result buf of operation op to its continuation and returns
// the record's status.
function complete(handle: u32, op: u32, buf: Uint8Array): i32 {
  if (!calls.has(handle)) return Status.FAIL; // a record that ended; its handle is no longer valid
  const pc = calls.get(handle);
  let po: PendingOp | null = null;
  for (let i = 0; i < pc.ops.length; i++) {
    if (pc.ops[i].id == op) { po = pc.ops[i]; pc.ops.splice(i, 1); break; }
  }
  const c = new Completion();
  const err = decodeCompletion(buf, c);
  if (po === null || (err === null && c.code == Code.CANCELED)) {
    if (pc.ops.length == 0) calls.delete(handle);
    return Status.FAIL;
  }
  if (err !== null) {
    calls.delete(handle);
    setError(handle, err);
    return Status.FAIL;
  }
  c.op = po.op;
  curHandle = handle; curRec = pc.rec; curBuf = pc.buf; curOut = pc.out; setAbortHandle(handle);
  const o = po.cont.then(pc.rec, pc.out, c);
  curHandle = 0; curRec = null; curBuf = null; curOut = null; setAbortHandle(0);
  return decide(handle, o);
}
