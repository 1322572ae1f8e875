// Byte helpers that behave exactly as their Go counterparts, so that an
// AssemblyScript processor produces the same bytes as a Go one.

import { CASE_RANGES } from "./unicode";

const RUNE_ERROR: i32 = 0xFFFD;
const UPPER_LOWER: i32 = 0x110000;

/** unicode.ToUpper: simple case mapping (no special casing: ß stays ß). */
export function runeToUpper(r: i32): i32 {
  if (r < 0x80) return r >= 0x61 && r <= 0x7a ? r - 32 : r;
  let lo = 0, hi = CASE_RANGES.length / 3;
  while (lo < hi) {
    const m = (lo + hi) >>> 1;
    const l = unchecked(CASE_RANGES[m * 3]), h = unchecked(CASE_RANGES[m * 3 + 1]);
    if (l <= r && r <= h) {
      const d = unchecked(CASE_RANGES[m * 3 + 2]);
      if (d == UPPER_LOWER) return l + ((r - l) & ~1);
      return r + d;
    }
    if (r < l) hi = m; else lo = m + 1;
  }
  return r;
}

/**
 * bytes.ToUpper: ASCII letters upper-cased in place of a copy; any other
 * UTF-8 is mapped rune by rune with unicode.ToUpper, and each invalid byte
 * becomes U+FFFD, as Go's bytes.Map does.
 */
export function bytesToUpper(s: Uint8Array): Uint8Array {
  const n = s.length;
  const p = s.dataStart;
  // All ASCII, the common case: eight bytes at a time, as the Go, Rust and
  // C examples do.
  let i = 0, high: u64 = 0;
  for (; i + 8 <= n; i += 8) high |= load<u64>(p + i);
  for (; i < n; i++) high |= <u64>load<u8>(p + i);
  if ((high & 0x8080808080808080) == 0) {
    const out = new Uint8Array(n);
    const q = out.dataStart;
    i = 0;
    for (; i + 8 <= n; i += 8) store<u64>(q + i, upperASCII8(load<u64>(p + i)));
    for (; i < n; i++) {
      const c = load<u8>(p + i);
      store<u8>(q + i, c - (<u8>(<u32>(c - 0x61) < 26) << 5));
    }
    return out;
  }
  let out = new Uint8Array(n + 16);
  let w = 0;
  for (let i = 0; i < n;) {
    let r = <i32>load<u8>(p + i), wid = 1;
    if (r >= 0x80) {
      const dr = decodeRune(p + i, n - i);
      r = <i32>(dr & 0xFFFFFFFF); wid = <i32>(dr >>> 32);
    }
    r = runeToUpper(r);
    if (w + 4 > out.length) {
      const nb = new Uint8Array(out.length * 2 + 4);
      memory.copy(nb.dataStart, out.dataStart, <usize>w);
      out = nb;
    }
    w += encodeRune(out.dataStart + w, r);
    i += wid;
  }
  return out.slice(0, w);
}

// upperASCII8 upper-cases the eight ASCII bytes of w (each below 0x80, so
// that no sum below carries into the next byte): a byte's high bit is set
// in ge when it is at least 'a', in gt when it is past 'z'; each one in
// between loses 0x20.
// @ts-ignore: decorator
@inline
function upperASCII8(w: u64): u64 {
  const ge = w + 0x1F1F1F1F1F1F1F1F; // 0x80 - 'a' in each byte
  const gt = w + 0x0505050505050505; // 0x80 - ('z' + 1)
  return w - (((ge & ~gt) & 0x8080808080808080) >> 2);
}

// utf8.DecodeRune: the rune in the low 32 bits, its width in the high ones;
// (RuneError, 1) for invalid or incomplete encodings.
function decodeRune(p: usize, n: i32): u64 {
  const b0 = <i32>load<u8>(p);
  const bad: u64 = (<u64>1 << 32) | <u64>RUNE_ERROR;
  let size = 0, lo = 0x80, hi = 0xBF;
  if (b0 < 0xC2) return bad;
  else if (b0 < 0xE0) size = 2;
  else if (b0 < 0xF0) { size = 3; if (b0 == 0xE0) lo = 0xA0; else if (b0 == 0xED) hi = 0x9F; }
  else if (b0 < 0xF5) { size = 4; if (b0 == 0xF0) lo = 0x90; else if (b0 == 0xF4) hi = 0x8F; }
  else return bad;
  if (n < 2) return bad;
  const b1 = <i32>load<u8>(p + 1);
  if (b1 < lo || b1 > hi) return bad;
  if (size == 2) return (<u64>2 << 32) | <u64>(((b0 & 0x1F) << 6) | (b1 & 0x3F));
  if (n < 3) return bad;
  const b2 = <i32>load<u8>(p + 2);
  if (b2 < 0x80 || b2 > 0xBF) return bad;
  if (size == 3) return (<u64>3 << 32) | <u64>(((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F));
  if (n < 4) return bad;
  const b3 = <i32>load<u8>(p + 3);
  if (b3 < 0x80 || b3 > 0xBF) return bad;
  return (<u64>4 << 32) | <u64>(((b0 & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F));
}

/** The UTF-8 width of the valid rune at p (n bytes left), or 0 when invalid (utf8.DecodeRune's rules). */
export function validRuneWidth(p: usize, n: i32): i32 {
  const dr = decodeRune(p, n);
  return <i32>(dr & 0xFFFFFFFF) == RUNE_ERROR && (dr >>> 32) == 1 ? 0 : <i32>(dr >>> 32);
}

/** The rune (low 32 bits) and width (high 32 bits) at p, as utf8.DecodeRune. */
export function decodeRuneAt(p: usize, n: i32): u64 { return decodeRune(p, n); }

// utf8.EncodeRune of a valid rune; returns the width.
function encodeRune(q: usize, r: i32): i32 {
  if (r < 0 || r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF)) r = RUNE_ERROR;
  if (r < 0x80) { store<u8>(q, <u8>r); return 1; }
  if (r < 0x800) { store<u8>(q, <u8>(0xC0 | (r >> 6))); store<u8>(q + 1, <u8>(0x80 | (r & 0x3F))); return 2; }
  if (r < 0x10000) {
    store<u8>(q, <u8>(0xE0 | (r >> 12))); store<u8>(q + 1, <u8>(0x80 | ((r >> 6) & 0x3F))); store<u8>(q + 2, <u8>(0x80 | (r & 0x3F)));
    return 3;
  }
  store<u8>(q, <u8>(0xF0 | (r >> 18))); store<u8>(q + 1, <u8>(0x80 | ((r >> 12) & 0x3F)));
  store<u8>(q + 2, <u8>(0x80 | ((r >> 6) & 0x3F))); store<u8>(q + 3, <u8>(0x80 | (r & 0x3F)));
  return 4;
}

/** bytes.Contains: whether sub occurs in s (an empty sub always does; a null s is empty). */
export function bytesContains(s: Uint8Array | null, sub: Uint8Array | null): bool {
  const m = sub === null ? 0 : sub.length;
  if (m == 0) return true;
  if (s === null) return false;
  const n = s.length;
  const p = s.dataStart, q = changetype<Uint8Array>(sub).dataStart;
  const first = load<u8>(q);
  for (let i = 0; i + m <= n; i++) {
    if (load<u8>(p + i) == first && memory.compare(p + i, q, <usize>m) == 0) return true;
  }
  return false;
}
