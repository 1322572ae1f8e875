// JSON and URL helpers of as-lookup, byte for byte as the Go lookup
// example's (encoding/json's string escaping and json.Valid, net/url's
// PathEscape).
import { decodeRuneAt } from "../../../../abi/sdk/assemblyscript/assembly/bytes";

/** A growable byte buffer. */
export class Buf {
  a: Uint8Array;
  n: i32 = 0;
  constructor(cap: i32) { this.a = new Uint8Array(cap < 16 ? 16 : cap); }
  reserve(k: i32): void {
    if (this.n + k <= this.a.length) return;
    let c = this.a.length * 2;
    if (c < this.n + k) c = this.n + k;
    const nb = new Uint8Array(c);
    memory.copy(nb.dataStart, this.a.dataStart, <usize>this.n);
    this.a = nb;
  }
  byte(c: u8): void { this.reserve(1); store<u8>(this.a.dataStart + this.n, c); this.n++; }
  raw(p: usize, k: i32): void { this.reserve(k); memory.copy(this.a.dataStart + this.n, p, <usize>k); this.n += k; }
  /** Appends an ASCII string. */
  str(s: string): void { for (let i = 0; i < s.length; i++) this.byte(<u8>s.charCodeAt(i)); }
  bytes(): Uint8Array { return this.a.slice(0, this.n); }
}

const HEX = "0123456789abcdef";

/** Appends s as a JSON string, escaped as encoding/json does (invalid UTF-8 becomes \ufffd). */
export function appendString(b: Buf, s: Uint8Array): void {
  b.byte(0x22);
  const p = s.dataStart, n = s.length;
  for (let i = 0; i < n;) {
    const c = load<u8>(p + i);
    if (c < 0x80) {
      if (c == 0x22 || c == 0x5c) { b.byte(0x5c); b.byte(c); }
      else if (c == 0x0a) { b.byte(0x5c); b.byte(0x6e); }
      else if (c == 0x0d) { b.byte(0x5c); b.byte(0x72); }
      else if (c == 0x09) { b.byte(0x5c); b.byte(0x74); }
      else if (c == 0x08) { b.byte(0x5c); b.byte(0x62); }
      else if (c == 0x0c) { b.byte(0x5c); b.byte(0x66); }
      else if (c < 0x20 || c == 0x3c || c == 0x3e || c == 0x26) {
        b.str("\\u00"); b.byte(<u8>HEX.charCodeAt(c >> 4)); b.byte(<u8>HEX.charCodeAt(c & 0xf));
      } else b.byte(c);
      i++;
      continue;
    }
    const dr = decodeRuneAt(p + i, n - i);
    const r = <i32>(dr & 0xFFFFFFFF), w = <i32>(dr >>> 32);
    if (r == 0xFFFD && w == 1) b.str("\\ufffd");
    else if (r == 0x2028 || r == 0x2029) { b.str("\\u202"); b.byte(<u8>HEX.charCodeAt(r & 0xf)); }
    else b.raw(p + i, w);
    i += w;
  }
  b.byte(0x22);
}

/** Appends v as JSON when it is JSON, as a string otherwise, null as null. */
export function appendEmbedded(b: Buf, v: Uint8Array | null): void {
  if (v === null) { b.str("null"); return; }
  if (jsonValid(v)) { b.raw(v.dataStart, v.length); return; }
  appendString(b, v);
}

// ---- json.Valid ----

const MAX_DEPTH = 10000; // encoding/json's maxNestingDepth

class P {
  i: i32 = 0;
  ok: bool = true;
  depth: i32 = 0;
  constructor(public p: usize, public n: i32) {}
  peek(): i32 { return this.i < this.n ? <i32>load<u8>(this.p + this.i) : -1; }
  ws(): void {
    while (this.i < this.n) {
      const c = load<u8>(this.p + this.i);
      if (c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d) this.i++; else break;
    }
  }
}

function isDigit(c: i32): bool { return c >= 0x30 && c <= 0x39; }
function isHex(c: i32): bool { return isDigit(c) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46); }

function lit(s: P, w: string): bool {
  for (let k = 0; k < w.length; k++) {
    if (s.peek() != w.charCodeAt(k)) return false;
    s.i++;
  }
  return true;
}

function str(s: P): bool {
  s.i++; // the opening quote
  while (true) {
    const c = s.peek();
    if (c < 0) return false;
    s.i++;
    if (c == 0x22) return true;
    if (c < 0x20) return false;
    if (c == 0x5c) {
      const e = s.peek();
      s.i++;
      if (e == 0x75) {
        for (let k = 0; k < 4; k++) { if (!isHex(s.peek())) return false; s.i++; }
      } else if (!(e == 0x22 || e == 0x5c || e == 0x2f || e == 0x62 || e == 0x66 || e == 0x6e || e == 0x72 || e == 0x74)) return false;
    }
  }
  return false;
}

function num(s: P): bool {
  if (s.peek() == 0x2d) s.i++;
  const c = s.peek();
  if (c == 0x30) s.i++;
  else if (c >= 0x31 && c <= 0x39) { while (isDigit(s.peek())) s.i++; }
  else return false;
  if (s.peek() == 0x2e) {
    s.i++;
    if (!isDigit(s.peek())) return false;
    while (isDigit(s.peek())) s.i++;
  }
  if (s.peek() == 0x65 || s.peek() == 0x45) {
    s.i++;
    if (s.peek() == 0x2b || s.peek() == 0x2d) s.i++;
    if (!isDigit(s.peek())) return false;
    while (isDigit(s.peek())) s.i++;
  }
  return true;
}

function value(s: P): bool {
  s.ws();
  const c = s.peek();
  if (c == 0x7b) { // {
    if (++s.depth > MAX_DEPTH) return false;
    s.i++; s.ws();
    if (s.peek() == 0x7d) { s.i++; s.depth--; return true; }
    while (true) {
      s.ws();
      if (s.peek() != 0x22 || !str(s)) return false;
      s.ws();
      if (s.peek() != 0x3a) return false;
      s.i++;
      if (!value(s)) return false;
      s.ws();
      const d = s.peek();
      s.i++;
      if (d == 0x7d) { s.depth--; return true; }
      if (d != 0x2c) return false;
    }
  }
  if (c == 0x5b) { // [
    if (++s.depth > MAX_DEPTH) return false;
    s.i++; s.ws();
    if (s.peek() == 0x5d) { s.i++; s.depth--; return true; }
    while (true) {
      if (!value(s)) return false;
      s.ws();
      const d = s.peek();
      s.i++;
      if (d == 0x5d) { s.depth--; return true; }
      if (d != 0x2c) return false;
    }
  }
  if (c == 0x22) return str(s);
  if (c == 0x74) return lit(s, "true");
  if (c == 0x66) return lit(s, "false");
  if (c == 0x6e) return lit(s, "null");
  if (c == 0x2d || isDigit(c)) return num(s);
  return false;
}

/** json.Valid: whether v is one JSON value, with surrounding white space. */
export function jsonValid(v: Uint8Array): bool {
  const s = new P(v.dataStart, v.length);
  if (!value(s)) return false;
  s.ws();
  return s.i == s.n;
}

// ---- url.PathEscape ----

const UPPER_HEX = "0123456789ABCDEF";

/** url.PathEscape of the bytes k. */
export function pathEscape(k: Uint8Array): string {
  const b = new Buf(k.length * 3);
  for (let i = 0; i < k.length; i++) {
    const c = k[i];
    const alnum = (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39);
    const keep = alnum || c == 0x2d || c == 0x5f || c == 0x2e || c == 0x7e || // - _ . ~
      c == 0x24 || c == 0x26 || c == 0x2b || c == 0x3a || c == 0x3d || c == 0x40; // $ & + : = @
    if (keep) b.byte(c);
    else { b.byte(0x25); b.byte(<u8>UPPER_HEX.charCodeAt(c >> 4)); b.byte(<u8>UPPER_HEX.charCodeAt(c & 0xf)); }
  }
  return String.UTF8.decode(b.bytes().buffer);
}
