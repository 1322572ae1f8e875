// The SDK's test processor, driven by tests/run.mjs with a fake host. The
// header "t" picks the behaviour.
import {
  register, Record, Emitter, Output, Outcome, Header, Completion, Then, HTTPRequest,
  ok, retry, fail, pending, awaitOp, http, get, timer, getenv, bytesToUpper, log, Level,
  stateGet, statePut, stateDelete, stateScan, StateVisitor, stateGetAsync, stateScanAsync,
} from "../../assembly/index";
export * from "../../assembly/exports";

function mode(r: Record): string {
  const h = r.header("t");
  if (h === null || h.value === null) return "";
  return String.UTF8.decode(h.value!.slice().buffer);
}

function utf8(s: string): Uint8Array { return Uint8Array.wrap(String.UTF8.encode(s)); }

class Then1 extends Then {
  constructor(public tag: string) { super(); }
  then(r: Record, out: Emitter, c: Completion): Outcome {
    if (!c.isOk) return c.failure();
    const resp = c.http();
    let body: Uint8Array | null = null;
    let ct: string | null = null;
    if (resp !== null) { body = resp.body; ct = resp.header("Content-Type"); }
    return out.emit(new Output(r.key, body, [new Header("tag", utf8(this.tag)), new Header("status", utf8(resp === null ? "-" : resp.status.toString())), new Header("ct", ct === null ? null : utf8(ct!))]));
  }
}

class Both extends Then {
  then(r: Record, out: Emitter, c: Completion): Outcome {
    if (c.op!.kind == 1) return pending(); // the timer: wait for the HTTP one
    return out.emit(new Output(r.key, utf8("both")));
  }
}

class EmitAll extends StateVisitor {
  st: Outcome = ok();
  n: i32 = 0;
  constructor(public out: Emitter, public limit: i32) { super(); }
  visit(key: Uint8Array, value: Uint8Array): bool {
    this.st = this.out.emit(new Output(key, value));
    return this.st.isOk && ++this.n < this.limit;
  }
}

// The asynchronous state get: the value with a header saying whether it was found.
class GetThen extends Then {
  then(r: Record, out: Emitter, c: Completion): Outcome {
    if (!c.isOk) return c.failure();
    const v = c.stateValue();
    if (v === null) return fail("malformed state get result");
    return out.emit(new Output(r.key, v.value, [new Header("found", utf8(v.found ? "yes" : "no"))]));
  }
}

// The asynchronous scan, one batch per operation; at the end, the number of batches.
class ScanThen extends Then {
  constructor(public prefix: Uint8Array, public size: i32, public batches: i32) { super(); }
  then(r: Record, out: Emitter, c: Completion): Outcome {
    if (!c.isOk) return c.failure();
    const b = c.stateBatch();
    if (b === null) return fail("malformed state scan result");
    if (b.done) return out.emit(new Output(utf8("batches"), utf8(this.batches.toString())));
    for (let i = 0; i < b.entries.length; i++) {
      const st = out.emit(new Output(b.entries[i].key, b.entries[i].value));
      if (!st.isOk) return st;
    }
    return awaitOp(stateScanAsync(this.prefix, b.after(), this.size), new ScanThen(this.prefix, this.size, this.batches + 1));
  }
}

function proc(r: Record, out: Emitter): Outcome {
  const m = mode(r);
  const key = r.key === null ? new Uint8Array(0) : r.key!;
  if (m == "sget") {
    const v = stateGet(key);
    if (!v.isOk) return v.outcome().terminal();
    return out.emit(new Output(key, v.value, [new Header("found", utf8(v.found ? "yes" : "no"))]));
  }
  if (m == "sput") return statePut(key, r.value).terminal();
  if (m == "sdel") return stateDelete(key).terminal();
  if (m == "sscan") {
    const lim = r.header("limit");
    const e = new EmitAll(out, lim === null ? i32.MAX_VALUE : I32.parseInt(String.UTF8.decode(lim.value!.slice().buffer)));
    const st = stateScan(key, e);
    if (!st.isOk) return st.terminal();
    return e.st;
  }
  if (m == "soutside") return ok();
  if (m == "aget") return awaitOp(stateGetAsync(key), new GetThen());
  if (m == "ascan") {
    const sz = r.header("size");
    const size = sz === null ? 0 : I32.parseInt(String.UTF8.decode(sz.value!.slice().buffer));
    return awaitOp(stateScanAsync(key, null, size), new ScanThen(key, size, 0));
  }
  if (m == "echo") {
    // Every field back: topic, partition, key, upper value, headers.
    const o = new Output(r.key, r.value === null ? null : bytesToUpper(r.value!), r.headers);
    const st = out.emit(o);
    if (!st.isOk) return st;
    const meta = r.idempotencyKey() + "|" + r.timestamp.toString() + "|" + r.attempt.toString();
    return out.emit(new Output(null, utf8(meta)).withTopic("side").withPartition(5));
  }
  if (m == "many") {
    // n outputs (header "n"), stopping at the first the host refuses.
    const h = r.header("n");
    const n = h === null ? 0 : I32.parseInt(String.UTF8.decode(h.value!.slice().buffer));
    for (let i = 0; i < n; i++) {
      const st = out.emit(new Output(utf8(i.toString()), r.value));
      if (!st.isOk) return st;
    }
    return ok();
  }
  if (m == "emitfail") {
    out.emit(new Output(r.key, r.value));
    return fail("failed after an output");
  }
  if (m == "badpart") {
    // A partition below -1 is refused at once; the processor goes on.
    const st = out.emit(new Output(r.key, r.value).withPartition(-2));
    if (st.isOk || st.errno != 3 || st.status != 3) return fail("a partition of -2 was not refused at once: " + st.message);
    return out.emit(new Output(r.key, utf8("kept")));
  }
  if (m == "retry") return retry("try again");
  if (m == "fail") return fail("give up");
  if (m == "pending") return pending();
  if (m == "env") { const v = getenv("NAME"); return out.emit(new Output(null, v === null ? null : utf8(v!))); }
  if (m == "http") {
    const req = new HTTPRequest();
    req.method = "POST";
    req.url = "http://svc/x";
    req.headers = [new Header("A", utf8("b")), new Header("N", null)];
    req.body = utf8("body");
    req.timeoutMs = 1500;
    return awaitOp(http(req), new Then1("http"));
  }
  if (m == "get") return awaitOp(get("http://svc/y"), new Then1("get"));
  if (m == "both") {
    const a = awaitOp(timer(7), new Both());
    if (!a.isPending) return a;
    return awaitOp(get("http://svc/z"), new Both());
  }
  if (m == "log") { log(Level.WARN, "hello from the guest"); return ok(); }
  if (m == "abort") { const a = new Array<i32>(1); return a[5] == 0 ? ok() : ok(); }
  return ok();
}

register(proc);
