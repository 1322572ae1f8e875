// as-lookup: the lookup processor in AssemblyScript, with the Go example's
// behaviour and output. It enriches each record with what an HTTP service
// knows about its key, without blocking: it starts a GET of
// $LOOKUP_URL<path-escaped key> (with the record's idempotency key as the
// Idempotency-Key header) and returns pending; the host performs the request
// while the instance takes other records and calls back with the response.
//
// The output's value is a JSON object:
//
//   {"key":"...","record":<the input value>,"lookup":<the response body>,"attempt":1}
//
// where the input value and the body are embedded as JSON when they are
// JSON, as strings otherwise, and "lookup" is null when the service answers
// 404. A 5xx or 429 answer or a transport error fails the record retryably;
// another 4xx, a refusal by the host's allow list, a null key or an unset
// LOOKUP_URL fails it terminally (dead letter). The output has the header
// lookup.status.
//
// The record header "lookup.mode" makes it misbehave on purpose, to test the
// host: "leak" re-arms a timer forever and never decides the record (the
// record deadline must catch it); "panic" aborts in the continuation (a
// trap: the instance is discarded with the other lookups it had in flight);
// "pending" returns pending without starting anything; "chain" waits 5 ms
// on a timer after the lookup before emitting.
//
// Configure it with the pipeline's env and allow the service's host:
//
//   env: {LOOKUP_URL: "http://127.0.0.1:8089/users/"}
//   async: {http: {allow_hosts: ["127.0.0.1:8089"]}}
//
// Build (from the repository root; see abi/sdk/assemblyscript/README.md):
//   node abi/sdk/assemblyscript/build.mjs plugins/examples/as-lookup/assembly/index.ts lookup.wasm
import {
  register, Record, Emitter, Output, Outcome, Header, Completion, Then, HTTPRequest,
  ok, retry, fail, pending, awaitOp, http, timer, getenv,
} from "../../../../abi/sdk/assemblyscript/assembly/index";
import { appendString, appendEmbedded, pathEscape, Buf } from "./json";
export * from "../../../../abi/sdk/assemblyscript/assembly/exports";

function modeOf(r: Record): string {
  const h = r.header("lookup.mode");
  if (h === null) return "";
  const v = h.value;
  return v === null ? "" : String.UTF8.decode(v.slice().buffer);
}

function lookup(r: Record, out: Emitter): Outcome {
  const base = getenv("LOOKUP_URL");
  if (base === null || base.length == 0) return fail("LOOKUP_URL is not set (pipelines[].env)");
  const key = r.key;
  if (key === null) return fail("the record has no key to look up");
  const mode = modeOf(r);
  if (mode == "leak") return awaitOp(timer(10), new Leak());
  if (mode == "pending") return pending();
  const req = new HTTPRequest();
  req.url = base + pathEscape(key);
  // The same on every attempt: a service that deduplicates sees one request per record.
  req.headers = [new Header("Idempotency-Key", Uint8Array.wrap(String.UTF8.encode(r.idempotencyKey())))];
  return awaitOp(http(req), new Looked(mode));
}

/** The continuation of the lookup. */
class Looked extends Then {
  constructor(public mode: string) { super(); }
  then(r: Record, out: Emitter, c: Completion): Outcome {
    if (this.mode == "panic") abort("asked to panic in the continuation");
    if (!c.isOk) {
      if (c.refused) return fail(c.message);
      return retry(c.message);
    }
    const resp = c.http();
    if (resp === null) return fail("malformed HTTP response");
    let found: Uint8Array | null = null;
    const st = resp.status;
    if (st == 200) {
      found = resp.body;
    } else if (st == 404) {
      // "lookup": null
    } else if (st == 429 || st >= 500) {
      return retry("lookup service answered " + st.toString());
    } else {
      const b = resp.body;
      let msg = "lookup service answered " + st.toString() + ": ";
      if (b !== null) msg += String.UTF8.decode(b.slice(0, b.length < 200 ? b.length : 200).buffer);
      return fail(msg);
    }
    const o = new Output(r.key, result(r, found), [new Header("lookup.status", Uint8Array.wrap(String.UTF8.encode(st.toString())))]);
    if (this.mode == "chain") return awaitOp(timer(5), new EmitLater(o));
    return out.emit(o);
  }
}

/** Emits the output once the chained timer fired. */
class EmitLater extends Then {
  constructor(public o: Output) { super(); }
  then(r: Record, out: Emitter, c: Completion): Outcome { return out.emit(this.o); }
}

/** Never decides its record. */
class Leak extends Then {
  then(r: Record, out: Emitter, c: Completion): Outcome { return awaitOp(timer(10), this); }
}

function result(r: Record, found: Uint8Array | null): Uint8Array {
  const b = new Buf(64 + (r.key === null ? 0 : r.key!.length) + (r.value === null ? 0 : r.value!.length) + (found === null ? 0 : found.length));
  b.str('{"key":');
  appendString(b, r.key!);
  b.str(',"record":');
  appendEmbedded(b, r.value);
  b.str(',"lookup":');
  appendEmbedded(b, found);
  b.str(',"attempt":');
  b.str(r.attempt.toString());
  b.byte(0x7d); // }
  return b.bytes();
}

register(lookup);
