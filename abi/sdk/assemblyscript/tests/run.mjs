// The SDK's unit tests. AssemblyScript compiles only to WebAssembly, so the
// SDK cannot run natively on the host: these tests compile a test processor
// (tests/assembly/index.ts) with the SDK's build script and run it in Node's
// WebAssembly engine against a fake host written here from abi/ABI.md. They
// check the encodings byte for byte (the golden vectors of
// abi/encoding_test.go), statuses, errors, async requests and completions,
// and the environment. The examples are tested inside the real host by
// host/asguest_test.go (go test ./host/ -run AS).
//
//   npm test          (after npm ci)
import { spawnSync } from "node:child_process";
import { readFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";

const sdk = dirname(dirname(fileURLToPath(import.meta.url)));
const out = join(mkdtempSync(join(tmpdir(), "wasmstream-as-")), "test.wasm");
const b = spawnSync(process.execPath, [join(sdk, "build.mjs"), join(sdk, "tests", "assembly", "index.ts"), out], { stdio: "inherit" });
if (b.status !== 0) process.exit(1);
const wasm = new WebAssembly.Module(readFileSync(out));

// Imports: only wasmstream_v1, the batch entry's record_next, the completions entry's completion_next and the allowed WASI functions (ABI.md §1, §10, §10.1).
const wasiAllowed = new Set(["args_get", "args_sizes_get", "clock_res_get", "clock_time_get", "environ_get", "environ_sizes_get", "fd_close", "fd_fdstat_get", "fd_fdstat_set_flags", "fd_prestat_dir_name", "fd_prestat_get", "fd_seek", "fd_write", "poll_oneoff", "proc_exit", "random_get", "sched_yield"]);
for (const im of WebAssembly.Module.imports(wasm)) {
  assert.ok(im.module === "wasmstream_v1" || (im.module === "wasmstream_batch_v1" && (im.name === "record_next" || im.name === "completion_next")) ||
    (im.module === "wasi_snapshot_preview1" && wasiAllowed.has(im.name)), `import ${im.module}.${im.name}`);
}
const exps = new Set(WebAssembly.Module.exports(wasm).map((e) => e.name));
for (const e of ["memory", "wasmstream_abi_version", "wasmstream_on_record", "wasmstream_on_complete", "wasmstream_on_batch_v1", "wasmstream_on_completions_v1"]) assert.ok(exps.has(e), `export ${e}`);

// ---- encoders written from ABI.md §5 ----
const te = new TextEncoder();
const cat = (...parts) => Buffer.concat(parts.map((p) => Buffer.from(p)));
const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v >>> 0); return b; };
const u64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt.asUintN(64, BigInt(v))); return b; };
const str = (s) => { const e = te.encode(s); return cat(u32(e.length), e); };
const nb = (v) => { if (v === null) return u32(0xffffffff); const b = typeof v === "string" ? te.encode(v) : v; return cat(u32(b.length), b); };
const headers = (hs) => cat(u32(hs.length), ...hs.flatMap(([k, v]) => [str(k), nb(v)]));
const record = (r) => cat(u64(r.offset), u64(r.timestamp), u32(r.partition), u32(r.attempt), str(r.topic), nb(r.key), nb(r.value), headers(r.headers));
const output = (o) => cat(str(o.topic), u32(o.partition), nb(o.key), nb(o.value), headers(o.headers));

// The golden record of TestGoldenRecord (abi/encoding_test.go, ABI.md §5.1).
const golden = record({ offset: 42, timestamp: 1700000000123, partition: 3, attempt: 1, topic: "in", key: "k", value: "hi", headers: [] });
assert.equal(golden.toString("hex"), "2a000000000000007b68e5cf8b01000003000000010000000200000069" + "6e010000006b020000006869" + "00000000");

// ---- the fake host ----
const state = new Map(); let scans = 0, stateless = false;
let inst, mem, rec = null, emitted = [], errors = {}, logs = [], stderr = "", started = [], result = null, nextOp = 1;
// batch: the batch call in progress (batchCall); maxOutputs: emit's limit per record (0: none).
let batch = null, maxOutputs = 0;
const env = ["NAME=wasmstream", "OTHER=x=y"];
const bytes = (p, n) => Buffer.from(new Uint8Array(mem.buffer, p, n));
const imports = {
  wasmstream_v1: {
    record_read(h, p, n) { if (h !== rec.h) return -1; if (n < rec.b.length) return -2; new Uint8Array(mem.buffer).set(rec.b, p); return rec.b.length; },
    emit(h, p, n) {
      const o = bytes(p, n);
      // As the host: a partition below -1 is malformed (ABI.md §5.2); a record's outputs are bounded.
      if (o.length < 8 || o.readInt32LE(4 + o.readUInt32LE(0)) < -1) return -3;
      if (maxOutputs > 0 && emitted.length >= maxOutputs) return -5;
      emitted.push([h, o]); return 0;
    },
    set_error(h, p, n) { errors[h] = bytes(p, n).toString(); return 0; },
    log(l, p, n) { logs.push([l, bytes(p, n).toString()]); },
    async_start(h, kind, p, n) {
      const req = Buffer.from(bytes(p, n));
      if (kind === 3 || kind === 4) {
        // As the host checks a state operation at async_start (ABI.md §7.3).
        const fields = [];
        let off = 0;
        for (let i = 0; i < (kind === 3 ? 1 : 2); i++) {
          if (req.length - off < 4 || req.readUInt32LE(off) > req.length - off - 4) return -3;
          fields.push(req.subarray(off + 4, off + 4 + req.readUInt32LE(off)).toString("latin1")); off += 4 + req.readUInt32LE(off);
        }
        if (off + (kind === 4 ? 4 : 0) !== req.length) return -3;
        if (stateless) return -11;
        if (fields.some((f) => f.length > 1024)) return -9;
        if (kind === 3 && fields[0].startsWith("other-")) return -10;
      }
      const id = nextOp++; started.push({ h, kind, id, req }); return id;
    },
    state_get(h, kp, kn, bp, bn) {
      if (h !== rec.h) return -1; if (kn > 1024) return -9;
      const v = state.get(bytes(kp, kn).toString("latin1")); if (v === undefined) return -8;
      if (v.length <= bn) new Uint8Array(mem.buffer).set(v, bp); return v.length;
    },
    state_put(h, kp, kn, vp, vn) { if (h !== rec.h) return -1; if (kn > 1024 || vn > 64 << 10) return -9; state.set(bytes(kp, kn).toString("latin1"), Buffer.from(bytes(vp, vn))); return 0; },
    state_delete(h, kp, kn) { if (h !== rec.h) return -1; if (kn > 1024) return -9; state.delete(bytes(kp, kn).toString("latin1")); return 0; },
    state_scan(h, pp, pn, ap, an, bp, bn) {
      if (h !== rec.h) return -1; if (pn > 1024 || an > 1024) return -9;
      scans++;
      const prefix = bytes(pp, pn).toString("latin1"), after = bytes(ap, an).toString("latin1");
      const keys = [...state.keys()].filter((k) => k.startsWith(prefix) && (an === 0 || k > after)).sort();
      let out = Buffer.alloc(0);
      for (const k of keys) {
        const e = cat(u32(k.length), Buffer.from(k, "latin1"), u32(state.get(k).length), state.get(k));
        // As the host: never a batch of the empty key alone (ABI.md §4.1).
        if (out.length + e.length > bn) { if (out.length === 0 || out.length === 8 + state.get("")?.length) return -2; break; }
        out = cat(out, e);
      }
      new Uint8Array(mem.buffer).set(out, bp); return out.length;
    },
    result_read(op, p, n) { if (op !== result.op) return -7; if (n < result.b.length) return -2; new Uint8Array(mem.buffer).set(result.b, p); return result.b.length; },
  },
  wasmstream_batch_v1: {
    // Ends the record in progress (its status and output list, §10) and begins the next.
    record_next(st, op, on, bp, bn) {
      if (batch === null) return -1;
      if (batch.cur) {
        const outs = emitted.map(([, o]) => o);
        if ((st === 0 || st === 1) && on > 0) {
          const list = Buffer.from(bytes(op, on));
          for (let off = 0; off < list.length; off += 4 + list.readUInt32LE(off)) outs.push(list.subarray(off + 4, off + 4 + list.readUInt32LE(off)));
        }
        batch.results.push({ h: rec.h, st, outs: st === 0 || st === 1 ? outs : [], err: errors[rec.h] });
      }
      batch.cur = batch.next < batch.recs.length;
      if (!batch.cur) return 0;
      rec = { h: ++handle, b: batch.recs[batch.next++] };
      emitted = []; started = [];
      if (rec.b.length <= bn) new Uint8Array(mem.buffer).set(rec.b, bp);
      return rec.b.length;
    },
    // The completions entry (§10.1) is tested inside the real host (host/completions_test.go).
    completion_next() { return -1; },
  },
  wasi_snapshot_preview1: {
    fd_write(fd, iovs, n, nw) {
      const v = new DataView(mem.buffer); let t = 0;
      for (let i = 0; i < n; i++) { const p = v.getUint32(iovs + 8 * i, true), l = v.getUint32(iovs + 8 * i + 4, true); if (fd === 2) stderr += bytes(p, l).toString(); t += l; }
      v.setUint32(nw, t, true); return 0;
    },
    environ_sizes_get(cp, sp) { const v = new DataView(mem.buffer); v.setUint32(cp, env.length, true); v.setUint32(sp, env.reduce((a, e) => a + te.encode(e).length + 1, 0), true); return 0; },
    environ_get(pp, bp) {
      const v = new DataView(mem.buffer); let off = bp;
      env.forEach((e, i) => { const b = te.encode(e); v.setUint32(pp + 4 * i, off, true); new Uint8Array(mem.buffer).set(b, off); v.setUint8(off + b.length, 0); off += b.length + 1; });
      return 0;
    },
  },
};
inst = new WebAssembly.Instance(wasm, imports);
mem = inst.exports.memory;
const X = inst.exports;
assert.equal(X.wasmstream_abi_version(), 1);

let handle = 0;
const recordOf = (r) => record({ offset: 0, timestamp: 0, partition: 0, attempt: 1, topic: "in", key: null, value: null, headers: [], ...r });
function call(r) {
  rec = { h: ++handle, b: recordOf(r) };
  emitted = []; started = [];
  return { h: handle, st: X.wasmstream_on_record(handle, rec.b.length) };
}
// Runs rs in one call of the batch entry; each record's { h, st, outs, err }.
function batchCall(rs) {
  const recs = rs.map(recordOf);
  batch = { recs, next: 0, cur: false, results: [] };
  const ret = X.wasmstream_on_batch_v1(handle + 1, recs.length, Math.max(...recs.map((b) => b.length)));
  const res = batch.results;
  batch = null;
  assert.equal(ret, 0);
  assert.equal(res.length, rs.length, "records taken");
  return res;
}
function complete(h, op, b) { result = { op, b }; emitted = []; started = []; return X.wasmstream_on_complete(h, op, b.length); }
const mode = (m, hs = []) => [["t", m], ...hs];
let n = 0;
const test = (name, fn) => { fn(); n++; console.log("ok  " + name); };

test("golden record decodes; output encoding is §5.2", () => {
  const { h, st } = call({ offset: 42, timestamp: 1700000000123, partition: 3, topic: "in", key: "k", value: "hi", headers: mode("echo") });
  assert.equal(st, 0);
  assert.deepEqual(emitted[0], [h, output({ topic: "", partition: -1, key: "k", value: "HI", headers: mode("echo") })]);
  assert.deepEqual(emitted[1][1], output({ topic: "side", partition: 5, key: null, value: "in/3/42|1700000000123|1", headers: [] }));
});

test("null and empty key, value, header values stay apart; non-ASCII; attempt", () => {
  const hs = mode("echo", [["null", null], ["empty", ""], ["ключ", "значение"]]);
  const c = call({ key: null, value: "", attempt: 4, headers: hs, topic: "другой", partition: 2147483647, offset: 2 ** 40 });
  assert.equal(c.st, 0, errors[c.h]);
  assert.deepEqual(emitted[0][1], output({ topic: "", partition: -1, key: null, value: "", headers: hs }));
  assert.deepEqual(emitted[1][1], output({ topic: "side", partition: 5, key: null, value: `другой/2147483647/${2 ** 40}|0|4`, headers: [] }));
  call({ key: "", value: null, headers: mode("echo") });
  assert.deepEqual(emitted[0][1], output({ topic: "", partition: -1, key: "", value: null, headers: mode("echo") }));
});

test("bytesToUpper is Go's bytes.ToUpper", () => {
  // Expected bytes from Go: bytes.ToUpper([]byte(in)).
  for (const [inp, want] of [
    ["abc xyz {}", "ABC XYZ {}"],
    ["grüße ß ǆ ǅ ﬁ ÿ", "GRÜßE ß Ǆ Ǆ ﬁ Ÿ"],
    [Buffer.from([0x61, 0xff, 0x62, 0xe2, 0x82]), Buffer.from("A\ufffdB\ufffd\ufffd")],
    [Buffer.from([0xed, 0xa0, 0x80]), Buffer.from("\ufffd\ufffd\ufffd")],
    ["𐐨ı", "𐐀I"],
  ]) {
    call({ key: null, value: inp, headers: mode("echo") });
    assert.deepEqual(emitted[0][1], output({ topic: "", partition: -1, key: null, value: Buffer.from(want), headers: mode("echo") }), `upper of ${inp}`);
  }
  const big = Buffer.alloc(210 * 1024, "é");
  call({ value: big, headers: mode("echo") });
  assert.deepEqual(emitted[0][1], output({ topic: "", partition: -1, key: null, value: Buffer.from(big.toString().toUpperCase()), headers: mode("echo") }));
});

test("retry and fail set the error", () => {
  let r = call({ headers: mode("retry") });
  assert.equal(r.st, 2); assert.equal(errors[r.h], "try again");
  r = call({ headers: mode("fail") });
  assert.equal(r.st, 3); assert.equal(errors[r.h], "give up");
  r = call({ headers: mode("pending") });
  assert.equal(r.st, 3); assert.match(errors[r.h], /no asynchronous operation is outstanding/);
});

test("getenv reads the pipeline's env through WASI", () => {
  call({ headers: mode("env") });
  assert.deepEqual(emitted[0][1], output({ topic: "", partition: -1, key: null, value: "wasmstream", headers: [] }));
});

test("HTTP request encoding (§7.3) and completion", () => {
  const { h, st } = call({ key: "k", headers: mode("http") });
  assert.equal(st, 1);
  assert.equal(started.length, 1);
  const { kind, id, req } = started[0];
  assert.equal(kind, 2);
  assert.deepEqual(req, cat(str("POST"), str("http://svc/x"), headers([["A", "b"], ["N", null]]), nb("body"), u32(1500)));
  const resp = cat([0], u32(201), headers([["Content-Type", "text/plain"]]), nb("answer"));
  assert.equal(complete(h, id, resp), 0);
  assert.deepEqual(emitted[0][1], output({ topic: "", partition: -1, key: "k", value: "answer", headers: [["tag", "http"], ["status", "201"], ["ct", "text/plain"]] }));
});

test("GET; error completions: error retries, refused fails, canceled is ignored", () => {
  let { h, st } = call({ key: "k", headers: mode("get") });
  assert.equal(st, 1);
  assert.deepEqual(started[0].req, cat(str("GET"), str("http://svc/y"), u32(0), nb(null), u32(0)));
  assert.equal(complete(h, started[0].id, cat([1], str("connection refused"))), 2);
  assert.equal(errors[h], "connection refused");
  ({ h, st } = call({ key: "k", headers: mode("get") }));
  assert.equal(complete(h, started[0].id, cat([3], str("not allowed"))), 3);
  ({ h, st } = call({ key: "k", headers: mode("get") }));
  const id = started[0].id;
  complete(h, id, cat([2], str("canceled")));
  assert.equal(emitted.length, 0);
});

test("two operations: timer (u64 ns) then HTTP; pending until the second decides", () => {
  const { h, st } = call({ key: "k", headers: mode("both") });
  assert.equal(st, 1);
  assert.equal(started.length, 2);
  assert.equal(started[0].kind, 1);
  assert.deepEqual(started[0].req, u64(7_000_000));
  const httpId = started[1].id;
  assert.equal(complete(h, started[0].id, Buffer.from([0])), 1);
  assert.equal(complete(h, httpId, cat([0], u32(200), u32(0), nb(null))), 0);
  assert.deepEqual(emitted[0][1], output({ topic: "", partition: -1, key: "k", value: "both", headers: [] }));
});

test("log", () => {
  call({ headers: mode("log") });
  assert.deepEqual(logs.at(-1), [2, "hello from the guest"]);
});

test("abort writes stderr, sets the error and traps", () => {
  assert.throws(() => call({ headers: mode("abort") }), WebAssembly.RuntimeError);
  assert.match(errors[handle], /^abort: Index out of range at /);
  assert.match(stderr, /^abort: Index out of range at .*\n$/);
});

test("state: get, put, delete, scan in batches, the buffer grown, too large", () => {
  const sget = (k) => { const c = call({ key: k, headers: mode("sget") }); assert.equal(c.st, 0, errors[c.h]); return emitted[0][1]; };
  assert.deepEqual(sget("a"), output({ topic: "", partition: -1, key: "a", value: null, headers: [["found", "no"]] }));
  assert.equal(call({ key: "a", value: "1", headers: mode("sput") }).st, 0);
  assert.deepEqual(sget("a"), output({ topic: "", partition: -1, key: "a", value: "1", headers: [["found", "yes"]] }));
  assert.equal(call({ key: "e", value: "", headers: mode("sput") }).st, 0);
  assert.deepEqual(sget("e"), output({ topic: "", partition: -1, key: "e", value: "", headers: [["found", "yes"]] }), "an empty value is a value");
  const big = Buffer.alloc(5000, "v");
  assert.equal(call({ key: "big", value: big, headers: mode("sput") }).st, 0);
  assert.deepEqual(sget("big"), output({ topic: "", partition: -1, key: "big", value: big, headers: [["found", "yes"]] }), "a value over the first buffer");
  assert.equal(call({ key: "a", headers: mode("sdel") }).st, 0);
  assert.deepEqual(sget("a"), output({ topic: "", partition: -1, key: "a", value: null, headers: [["found", "no"]] }));
  let c = call({ key: "x", value: Buffer.alloc((64 << 10) + 1), headers: mode("sput") });
  assert.equal(c.st, 3); assert.equal(errors[c.h], "state_put: abi: state key or value too large");
  c = call({ key: "k".repeat(1025), headers: mode("sget") });
  assert.equal(c.st, 3); assert.match(errors[c.h], /state key or value too large/);
  for (let i = 0; i < 300; i++) state.set("s/" + String(i).padStart(3, "0"), Buffer.alloc(300, "x"));
  scans = 0;
  c = call({ key: "s/", headers: mode("sscan") });
  assert.equal(c.st, 0, errors[c.h]);
  assert.equal(emitted.length, 300); assert.ok(scans >= 3, `${scans} scan calls`);
  emitted.forEach(([, o], i) => assert.deepEqual(o, output({ topic: "", partition: -1, key: "s/" + String(i).padStart(3, "0"), value: Buffer.alloc(300, "x"), headers: [] })));
  c = call({ key: "s/", headers: mode("sscan", [["limit", "5"]]) });
  assert.equal(emitted.length, 5);
  c = call({ key: "", headers: mode("sscan") });
  assert.equal(emitted.length, 302); // s/…, big, e
  state.set("huge", Buffer.alloc(100 << 10, "h"));
  c = call({ key: "huge", headers: mode("sscan") });
  assert.equal(c.st, 0, errors[c.h]); assert.equal(emitted[0][1].length, output({ topic: "", partition: -1, key: "huge", value: state.get("huge"), headers: [] }).length, "the buffer grows for an entry");
  c = call({ key: "p".repeat(1025), headers: mode("sscan") });
  assert.equal(c.st, 3); assert.match(errors[c.h], /state_scan: .*too large/);
});

test("state: the empty key is a key, listed first by a scan, even when its entry alone fills the first buffer", () => {
  const c0 = call({ key: null, headers: mode("sput") });
  assert.equal(c0.st, 0, errors[c0.h]);
  assert.ok(state.has(""), "a null record key writes the empty key");
  state.set("", Buffer.alloc((64 << 10) - 8 - 4, "v")); // the first buffer (64 KiB) holds its entry and nothing more
  const c = call({ key: "", headers: mode("sscan") });
  assert.equal(c.st, 0, errors[c.h]);
  assert.equal(emitted.length, state.size);
  assert.deepEqual(emitted[0][1], output({ topic: "", partition: -1, key: "", value: state.get(""), headers: [] }));
  state.delete("");
});

const entries = (kvs) => cat(...kvs.map(([k, v]) => cat(u32(Buffer.byteLength(k)), Buffer.from(k), u32(Buffer.byteLength(v)), Buffer.from(v))));

test("async state get (§7.3, kind 3): request, found, not found, an empty value, an error, malformed", () => {
  const aget = (payload) => {
    const { h, st } = call({ key: "a", headers: mode("aget") });
    assert.equal(st, 1, errors[h]);
    assert.equal(started.length, 1);
    assert.equal(started[0].kind, 3);
    assert.deepEqual(started[0].req, str("a"));
    return { h, st: complete(h, started[0].id, payload) };
  };
  let r = aget(cat([0], nb("7")));
  assert.equal(r.st, 0, errors[r.h]);
  assert.deepEqual(emitted[0][1], output({ topic: "", partition: -1, key: "a", value: "7", headers: [["found", "yes"]] }));
  r = aget(cat([0], nb(null)));
  assert.deepEqual(emitted[0][1], output({ topic: "", partition: -1, key: "a", value: null, headers: [["found", "no"]] }));
  r = aget(cat([0], nb("")));
  assert.deepEqual(emitted[0][1], output({ topic: "", partition: -1, key: "a", value: "", headers: [["found", "yes"]] }), "an empty value is a value");
  r = aget(cat([1], str("state store closed")));
  assert.equal(r.st, 2); assert.equal(errors[r.h], "state store closed");
  r = aget(cat([0], nb("7"), [0]));
  assert.equal(r.st, 3); assert.equal(errors[r.h], "malformed state get result");
});

test("async state scan (§7.3, kind 4): request, batches chained by the cursor, the bound cut to 1 MiB", () => {
  const { h, st } = call({ key: "s/", headers: mode("ascan", [["size", "100"]]) });
  assert.equal(st, 1, errors[h]);
  assert.equal(started[0].kind, 4);
  assert.deepEqual(started[0].req, cat(str("s/"), str(""), u32(100)));
  assert.equal(complete(h, started[0].id, cat([0], entries([["s/1", "a"], ["s/2", ""]]))), 1);
  assert.deepEqual(emitted.map(([, o]) => o), [output({ topic: "", partition: -1, key: "s/1", value: "a", headers: [] }), output({ topic: "", partition: -1, key: "s/2", value: "", headers: [] })]);
  assert.deepEqual(started[0].req, cat(str("s/"), str("s/2"), u32(100)));
  assert.equal(complete(h, started[0].id, cat([0], entries([["s/3", "c"]]))), 1);
  assert.deepEqual(started[0].req, cat(str("s/"), str("s/3"), u32(100)));
  assert.equal(complete(h, started[0].id, Buffer.from([0])), 0);
  assert.deepEqual(emitted[0][1], output({ topic: "", partition: -1, key: "batches", value: "2", headers: [] }));
  let c = call({ key: "", headers: mode("ascan", [["size", String(5 << 20)]]) });
  assert.deepEqual(started[0].req, cat(str(""), str(""), u32(1 << 20)));
  assert.equal(complete(c.h, started[0].id, cat([0], [1, 0, 0, 0])), 3);
  assert.equal(errors[c.h], "malformed state scan result");
  c = call({ key: "", headers: mode("ascan", [["size", "-1"]]) });
  assert.deepEqual(started[0].req, cat(str(""), str(""), u32(0)));
});

test("async state refused at async_start: terminal, naming the errno (-9, -10, -11)", () => {
  for (const [r, want] of [
    [{ key: "k".repeat(1025), headers: mode("aget") }, "wasmstream: start state_get operation: abi: state key or value too large"],
    [{ key: "p".repeat(1025), headers: mode("ascan") }, "wasmstream: start state_scan operation: abi: state key or value too large"],
    [{ key: "other-a", headers: mode("aget") }, "wasmstream: start state_get operation: abi: state key outside the record's partition"],
  ]) {
    const c = call(r);
    assert.equal(c.st, 3, want); assert.equal(errors[c.h], want); assert.equal(started.length, 0);
  }
  stateless = true;
  const c = call({ key: "a", headers: mode("aget") });
  stateless = false;
  assert.equal(c.st, 3); assert.equal(errors[c.h], "wasmstream: start state_get operation: abi: state not enabled for this pipeline");
});

test("the batch entry (§10): each record as in a call of its own; outputs in the list, past 64 (or 64 KiB) one by one", () => {
  const many = (n, v = "v") => ({ value: v, headers: mode("many", [["n", String(n)]]) });
  const rs = [
    { key: "k", value: "hi", headers: mode("echo"), offset: 3 },
    { key: "k", value: "lost", headers: mode("emitfail") },
    many(3), many(0), many(64), many(65), many(200),
    many(30, Buffer.alloc(3000, "x")), // 64 KiB in the list before 64 outputs
    { key: "k", headers: mode("http") }, // pending: the next record gets a buffer of its own
    { key: "after", value: Buffer.alloc(50 << 10, "é"), headers: mode("echo") },
    { key: "k", value: "v", headers: mode("badpart") },
    { headers: mode("retry") },
    { key: "last", value: "x", headers: mode("echo") },
  ];
  const alone = rs.map((r) => { const c = call(r); return { st: c.st, outs: c.st === 0 ? emitted.map(([, o]) => o) : [], err: errors[c.h] }; });
  for (let round = 0; round < 2; round++) { // the second reuses the SDK's buffers
    const got = batchCall(rs);
    got.forEach((g, i) => {
      assert.equal(g.st, alone[i].st, `record ${i}: ${g.err}`);
      assert.deepEqual(g.outs, alone[i].outs, `record ${i}: outputs`);
      assert.equal(g.err, alone[i].err, `record ${i}: error`);
    });
    assert.equal(got[6].outs.length, 200);
    assert.deepEqual([got[1].st, got[8].st, got[11].st], [3, 1, 2]);
    assert.equal(got[1].err, "failed after an output");
  }
  // A limit: past 64 outputs, emit returns the host's refusal as alone.
  maxOutputs = 80;
  const lim = [many(100), many(70), many(10)];
  const limAlone = lim.map((r) => { const c = call(r); return [c.st, errors[c.h], c.st === 0 ? emitted.length : 0]; });
  const limGot = batchCall(lim).map((g) => [g.st, g.err, g.outs.length]);
  maxOutputs = 0;
  assert.deepEqual(limGot, limAlone);
  assert.deepEqual(limGot[0].slice(0, 2), [2, "emit: abi: limit"]);
  // Outside a batch call record_next returns -1; the module's single calls go on as before.
  assert.equal(call({ key: "k", value: "x", headers: mode("echo") }).st, 0);
});

test("jsonField: members, numbers, strings, malformed and too-deep values (tests/assembly/json.ts)", () => {
  const jout = join(dirname(out), "json.wasm");
  const jb = spawnSync(process.execPath, [join(sdk, "build.mjs"), join(sdk, "tests", "assembly", "json.ts"), jout], { stdio: "inherit" });
  assert.equal(jb.status, 0);
  const jm = new WebAssembly.Module(readFileSync(jout));
  const stub = {};
  for (const im of WebAssembly.Module.imports(jm)) (stub[im.module] ??= {})[im.name] = () => 0;
  const ji = new WebAssembly.Instance(jm, stub);
  assert.equal(ji.exports.jsonTests(), 0, "the number of the first failing check in tests/assembly/json.ts");
});

console.log(`${n} tests passed`);
