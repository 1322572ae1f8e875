// The binary encodings of ABI.md §5 and §7, as abi/encoding.go and
// abi/async.go write and read them. All integers are little-endian.

/** A Kafka record header; a null value is distinct from an empty one. */
export class Header {
  constructor(public key: string, public value: Uint8Array | null = null) {}
}

/** Reads an encoding; the first malformed field sets `err` and later reads return zero values. */
export class Reader {
  off: i32 = 0;
  err: string | null = null;
  /** The end of the encoding in buf (buf.length unless set by reset). */
  end: i32;
  constructor(public buf: Uint8Array) { this.end = buf.length; }

  /** Reads buf[0:end] from the start again (a Reader reused across records). */
  reset(buf: Uint8Array, end: i32): Reader {
    this.buf = buf; this.end = end; this.off = 0; this.err = null;
    return this;
  }

  need(n: i32): bool {
    if (this.err !== null) return false;
    if (n < 0 || n > this.end - this.off) {
      this.err = "need " + n.toString() + " bytes at offset " + this.off.toString() + ", have " + (this.end - this.off).toString();
      return false;
    }
    return true;
  }
  u8(): u8 {
    if (!this.need(1)) return 0;
    const v = load<u8>(this.buf.dataStart + this.off);
    this.off += 1;
    return v;
  }
  u32(): u32 {
    if (!this.need(4)) return 0;
    const v = load<u32>(this.buf.dataStart + this.off);
    this.off += 4;
    return v;
  }
  u64(): u64 {
    if (!this.need(8)) return 0;
    const v = load<u64>(this.buf.dataStart + this.off);
    this.off += 8;
    return v;
  }
  /** A string: u32 length + UTF-8 bytes (decoded to an AssemblyScript string). */
  str(): string {
    const n = this.u32();
    if (this.err !== null) return "";
    if (n > <u32>i32.MAX_VALUE) { this.err = "string length " + n.toString(); return ""; }
    if (!this.need(<i32>n)) return "";
    const s = String.UTF8.decodeUnsafe(this.buf.dataStart + this.off, <usize>n);
    this.off += <i32>n;
    return s;
  }
  /** Nullable bytes: i32 length (-1: null) + bytes. The result is a view of the buffer. */
  bytes(): Uint8Array | null {
    const n = <i32>this.u32();
    if (this.err !== null || n == -1) return null;
    if (n < -1) { this.err = "length " + n.toString(); return null; }
    if (!this.need(n)) return null;
    const v = this.buf.subarray(this.off, this.off + n);
    this.off += n;
    return v;
  }
  headers(): Header[] { return this.headersInto(new Array<Header>(0)); }

  /** Decodes headers into hs (emptied first), and returns it. */
  headersInto(hs: Header[]): Header[] {
    hs.length = 0;
    const n = this.u32();
    if (this.err !== null || n == 0) return hs;
    if (<u64>n * 8 > <u64>(this.end - this.off)) {
      this.err = "header count " + n.toString() + " exceeds remaining " + (this.end - this.off).toString() + " bytes";
      return hs;
    }
    for (let i: i32 = 0; i < <i32>n; i++) {
      const k = this.str();
      hs.push(new Header(k, this.bytes()));
    }
    return hs;
  }
  /** Rejects trailing bytes; returns the error, or null. */
  finish(what: string): string | null {
    if (this.err === null && this.off != this.end) {
      this.err = (this.end - this.off).toString() + " trailing bytes after " + what;
    }
    const e = this.err;
    return e === null ? null : "abi: decode " + what + ": " + e;
  }
}

/** Appends an encoding to a growable buffer, reused across calls. */
export class Writer {
  buf: ArrayBuffer;
  len: i32 = 0;
  constructor(cap: i32 = 256) { this.buf = new ArrayBuffer(cap); }

  reset(): Writer { this.len = 0; return this; }
  get ptr(): usize { return changetype<usize>(this.buf); }

  grow(n: i32): void {
    const need = this.len + n;
    if (need <= this.buf.byteLength) return;
    let c = this.buf.byteLength << 1;
    if (c < need) c = need;
    const nb = new ArrayBuffer(c);
    memory.copy(changetype<usize>(nb), changetype<usize>(this.buf), <usize>this.len);
    this.buf = nb;
  }
  u8(v: u8): void { this.grow(1); store<u8>(this.ptr + this.len, v); this.len += 1; }
  u32(v: u32): void { this.grow(4); store<u32>(this.ptr + this.len, v); this.len += 4; }
  u64(v: u64): void { this.grow(8); store<u64>(this.ptr + this.len, v); this.len += 8; }
  raw(p: usize, n: i32): void {
    this.grow(n);
    memory.copy(this.ptr + this.len, p, <usize>n);
    this.len += n;
  }
  str(s: string): void {
    const n = String.UTF8.byteLength(s);
    this.grow(4 + n);
    store<u32>(this.ptr + this.len, <u32>n);
    String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, this.ptr + this.len + 4);
    this.len += 4 + n;
  }
  bytes(b: Uint8Array | null): void {
    if (b === null) { this.u32(0xFFFFFFFF); return; }
    const v = changetype<Uint8Array>(b);
    this.u32(<u32>v.length);
    this.raw(v.dataStart, v.length);
  }
  headers(hs: Header[] | null): void {
    if (hs === null) { this.u32(0); return; }
    const a = changetype<Header[]>(hs);
    this.u32(<u32>a.length);
    for (let i = 0; i < a.length; i++) {
      const h = unchecked(a[i]);
      this.str(h.key);
      this.bytes(h.value);
    }
  }
  /** A copy of what was written. */
  toBytes(): Uint8Array {
    const u = new Uint8Array(this.len);
    memory.copy(u.dataStart, this.ptr, <usize>this.len);
    return u;
  }
}
