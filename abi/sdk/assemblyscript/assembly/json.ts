// A small, bounded reader (not a validator) of top-level JSON object fields,
// for processors that look at a field or two of a JSON value: it allocates
// only the result, reads each byte at most once and refuses nesting deeper
// than JSON_MAX_DEPTH. The same reader as the Rust SDK's wasmstream::json.
//
//   const amount = jsonField(r.value, "amount");
//   if (amount.error !== null) return fail(amount.error!);   // not a JSON object
//   if (!amount.found) return fail("no amount");
//   if (!amount.isNumber()) return fail("amount is not a number");
//   if (amount.asNumber() < 10) return ok();                  // dropped

/** The deepest nesting of objects and arrays the reader walks through. */
export const JSON_MAX_DEPTH: i32 = 64;

/** One member's value: found, or not; or why the object could not be read. */
export class JsonValue {
  /** Why the value is not a readable JSON object ("invalid JSON at byte N: ..."), or null. */
  error: string | null = null;
  /** Whether the object has the member. */
  found: bool = false;
  /** The member's value as written (a view into the record's bytes), or null. */
  raw: Uint8Array | null = null;

  /** Whether the value is a JSON number. */
  isNumber(): bool {
    const b = this.raw;
    if (b === null || b.length == 0) return false;
    const c0 = b[0];
    if (c0 != 0x2d && (c0 < 0x30 || c0 > 0x39)) return false;
    for (let i = 0; i < b.length; i++) {
      const c = b[i];
      if (!((c >= 0x30 && c <= 0x39) || c == 0x2d || c == 0x2b || c == 0x2e || c == 0x65 || c == 0x45)) return false;
    }
    return !isNaN(this.asNumber());
  }

  /** The value as a number: NaN when it is not one (check isNumber). */
  asNumber(): f64 {
    const b = this.raw;
    if (b === null) return NaN;
    return parseFloat(String.UTF8.decode(b.buffer.slice(b.byteOffset, b.byteOffset + b.length)));
  }

  /** The value as a string without escapes, or null (another kind, or escapes). */
  asString(): string | null {
    const b = this.raw;
    if (b === null || b.length < 2 || b[0] != 0x22) return null;
    for (let i = 1; i < b.length - 1; i++) if (b[i] == 0x5c) return null;
    return String.UTF8.decode(b.buffer.slice(b.byteOffset + 1, b.byteOffset + b.length - 1));
  }
}

class Parser {
  i: i32 = 0;
  err: string | null = null;
  constructor(public b: Uint8Array) {}
  fail(what: string): bool { if (this.err === null) this.err = "invalid JSON at byte " + this.i.toString() + ": " + what; return false; }
  peek(): i32 { return this.i < this.b.length ? <i32>this.b[this.i] : -1; }
  ws(): void {
    while (this.i < this.b.length) {
      const c = this.b[this.i];
      if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
      this.i++;
    }
  }
  expect(c: i32, what: string): bool { if (this.peek() != c) return this.fail(what); this.i++; return true; }
  /** A string: i ends after the closing quote. */
  str(): bool {
    if (!this.expect(0x22, "expected a string")) return false;
    while (true) {
      const c = this.peek();
      if (c < 0) return this.fail("unterminated string");
      this.i++;
      if (c == 0x22) return true;
      if (c == 0x5c) this.i++;
      else if (c < 0x20) return this.fail("control character in a string");
    }
  }
  /** Skips one value, counting open brackets (no recursion). */
  value(): bool {
    let depth = 0;
    while (true) {
      this.ws();
      const c = this.peek();
      if (c == 0x22) {
        if (!this.str()) return false;
      } else if (c == 0x7b || c == 0x5b) {
        if (++depth > JSON_MAX_DEPTH) return this.fail("nested too deep");
        this.i++;
        continue;
      } else if ((c == 0x7d || c == 0x5d) && depth > 0) {
        depth--;
        this.i++;
      } else if (scalar(c)) {
        while (scalar(this.peek())) this.i++;
      } else {
        return this.fail("expected a value");
      }
      if (depth == 0) return true;
      this.ws();
      const d = this.peek();
      if (d == 0x2c || d == 0x3a) this.i++;
      else if (d != 0x7d && d != 0x5d) return this.fail("expected ',' or a closing bracket");
    }
  }
}

function scalar(c: i32): bool {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c == 0x2d || c == 0x2b || c == 0x2e;
}

function keyIs(b: Uint8Array, start: i32, end: i32, key: Uint8Array): bool {
  if (end - start != key.length) return false;
  for (let i = 0; i < key.length; i++) if (b[start + i] != key[i]) return false;
  return true;
}

/**
 * The top-level member key of the JSON object v (the first one, when the
 * key repeats). Keys are compared as written (a key spelled with escapes
 * does not match). The members before it are checked; the rest is not.
 */
export function jsonField(v: Uint8Array | null, key: string): JsonValue {
  const res = new JsonValue();
  if (v === null) { res.error = "invalid JSON at byte 0: a null value"; return res; }
  const k = Uint8Array.wrap(String.UTF8.encode(key));
  const p = new Parser(v);
  p.ws();
  if (!p.expect(0x7b, "not a JSON object")) { res.error = p.err; return res; }
  p.ws();
  if (p.peek() == 0x7d) return res;
  while (true) {
    p.ws();
    const ks = p.i + 1;
    if (!p.str()) break;
    const ke = p.i - 1;
    p.ws();
    if (!p.expect(0x3a, "expected ':'")) break;
    p.ws();
    const start = p.i;
    if (!p.value()) break;
    if (keyIs(v, ks, ke, k)) {
      res.found = true;
      res.raw = v.subarray(start, p.i);
      return res;
    }
    p.ws();
    const c = p.peek();
    p.i++;
    if (c == 0x7d) return res;
    if (c != 0x2c) { p.i--; p.fail("expected ',' or '}'"); break; }
  }
  res.error = p.err;
  return res;
}
