// uppercase.c — a wasmstream processor in C, written from abi/ABI.md alone:
// it emits each record with its value upper-cased, keeping key and headers.
// It upper-cases as Go's bytes.ToUpper does (Unicode simple case mapping,
// from Go's tables in case_ranges.h; each byte of invalid UTF-8 becomes
// U+FFFD), so its outputs are byte for byte those of the Go, AssemblyScript
// and Rust examples (internal/conformance checks them all).
//
// Build (Debian: apt-get install clang lld wasi-libc libclang-rt-14-dev-wasm32):
//   clang --target=wasm32-wasi -O2 -mexec-model=reactor -o uppercase.wasm uppercase.c
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "case_ranges.h"

#define IMPORT(name) __attribute__((import_module("wasmstream_v1"), import_name(name)))
#define EXPORT(name) __attribute__((export_name(name)))

IMPORT("record_read") int32_t record_read(uint32_t handle, void *buf, uint32_t len);
IMPORT("emit") int32_t emit(uint32_t handle, const void *ptr, uint32_t len);
IMPORT("set_error") int32_t set_error(uint32_t handle, const void *ptr, uint32_t len);
// The batch entry (ABI.md 10): record_next ends the record in progress with
// its status and output list, then begins the next one.
__attribute__((import_module("wasmstream_batch_v1"), import_name("record_next")))
int32_t record_next(int32_t status, const void *out, uint32_t out_len, void *buf, uint32_t buf_len);

enum { STATUS_OK = 0, STATUS_FAIL = 3 };

EXPORT("wasmstream_abi_version") int32_t abi_version(void) { return 1; }

// Buffers reused across records (an instance runs one call at a time).
static uint8_t *in, *out;
static uint32_t in_cap, out_cap;

static int grow(uint8_t **buf, uint32_t *cap, uint32_t need) {
	if (need <= *cap) return 1;
	uint8_t *b = realloc(*buf, need);
	if (!b) return 0;
	*buf = b;
	*cap = need;
	return 1;
}

static uint32_t u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

static int32_t fail(uint32_t handle, const char *msg) {
	set_error(handle, msg, strlen(msg));
	return STATUS_FAIL;
}

// Go's unicode.ToUpper: the simple upper-case mapping of rune r.
static uint32_t upper_rune(uint32_t r) {
	if (r < 0x80) return (r >= 'a' && r <= 'z') ? r - ('a' - 'A') : r;
	uint32_t lo = 0, hi = N_CASE_RANGES;
	while (lo < hi) {
		uint32_t m = lo + (hi - lo) / 2;
		const int32_t *cr = CASE_RANGES[m];
		if (r < (uint32_t)cr[0]) hi = m;
		else if (r > (uint32_t)cr[1]) lo = m + 1;
		else if (cr[2] == UPPER_LOWER) return (uint32_t)cr[0] + ((r - (uint32_t)cr[0]) & ~1u);
		else return (uint32_t)((int32_t)r + cr[2]);
	}
	return r;
}

// Go's utf8.DecodeRune: the rune at s[0:n] and its width; invalid UTF-8
// (overlong forms, surrogates, past U+10FFFF, truncated) is U+FFFD, width 1.
static uint32_t decode_rune(const uint8_t *s, uint32_t n, uint32_t *width) {
	uint8_t b0 = s[0];
	*width = 1;
	if (b0 < 0x80) return b0;
	uint32_t need;
	uint8_t lo = 0x80, hi = 0xBF;
	if (b0 >= 0xC2 && b0 <= 0xDF) need = 2;
	else if (b0 >= 0xE0 && b0 <= 0xEF) { need = 3; if (b0 == 0xE0) lo = 0xA0; if (b0 == 0xED) hi = 0x9F; }
	else if (b0 >= 0xF0 && b0 <= 0xF4) { need = 4; if (b0 == 0xF0) lo = 0x90; if (b0 == 0xF4) hi = 0x8F; }
	else return 0xFFFD;
	if (n < need || s[1] < lo || s[1] > hi) return 0xFFFD;
	for (uint32_t i = 2; i < need; i++)
		if (s[i] < 0x80 || s[i] > 0xBF) return 0xFFFD;
	*width = need;
	if (need == 2) return ((uint32_t)(b0 & 0x1F) << 6) | (s[1] & 0x3F);
	if (need == 3) return ((uint32_t)(b0 & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
	return ((uint32_t)(b0 & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
}

static uint32_t encode_rune(uint8_t *p, uint32_t r) {
	if (r < 0x80) { p[0] = (uint8_t)r; return 1; }
	if (r < 0x800) { p[0] = 0xC0 | (r >> 6); p[1] = 0x80 | (r & 0x3F); return 2; }
	if (r < 0x10000) { p[0] = 0xE0 | (r >> 12); p[1] = 0x80 | ((r >> 6) & 0x3F); p[2] = 0x80 | (r & 0x3F); return 3; }
	p[0] = 0xF0 | (r >> 18); p[1] = 0x80 | ((r >> 12) & 0x3F); p[2] = 0x80 | ((r >> 6) & 0x3F); p[3] = 0x80 | (r & 0x3F);
	return 4;
}

// Go's bytes.ToUpper of s[0:n] into dst (room for 3*n bytes: one byte of
// invalid UTF-8 becomes the three of U+FFFD); returns the length written.
static uint32_t to_upper(uint8_t *dst, const uint8_t *s, uint32_t n) {
	uint32_t o = 0;
	for (uint32_t i = 0; i < n;) {
		if (n - i >= 8) { // eight ASCII bytes at a time, the common case
			uint64_t w;
			memcpy(&w, s + i, 8);
			if ((w & 0x8080808080808080ull) == 0) {
				// A byte's high bit set in ge_a: >= 'a'; in gt_z: > 'z'.
				uint64_t ge_a = w + 0x1f1f1f1f1f1f1f1full, gt_z = w + 0x0505050505050505ull;
				w -= ((ge_a & ~gt_z) & 0x8080808080808080ull) >> 2; // 0x80 >> 2 = 'a' - 'A'
				memcpy(dst + o, &w, 8);
				i += 8;
				o += 8;
				continue;
			}
		}
		if (s[i] < 0x80) { // ASCII
			uint8_t c = s[i++];
			dst[o++] = (c >= 'a' && c <= 'z') ? c - ('a' - 'A') : c;
			continue;
		}
		uint32_t w;
		uint32_t r = decode_rune(s + i, n - i, &w);
		o += encode_rune(dst + o, upper_rune(r));
		i += w;
	}
	return o;
}

// Record layout (ABI.md 5.1): i64 offset, i64 timestamp, i32 partition,
// u32 attempt, string topic, nullable key, nullable value, headers.
// upper processes the record handle, len bytes at in, and writes its output
// at out + 4 (the 4 bytes before it are for the output list's length, see
// on_batch); *olen is the output's length.
static int32_t upper(uint32_t handle, uint32_t len, uint32_t *olen) {
	uint32_t pos = 24; // offset, timestamp, partition, attempt
	if (len < pos + 4) return fail(handle, "short record");
	pos += 4 + u32(in + pos); // topic
	uint32_t key_at = pos; // nullable key: i32 length, -1 = null
	if (pos + 4 > len) return fail(handle, "short record");
	uint32_t klen = u32(in + pos);
	pos += 4 + (klen == 0xFFFFFFFFu ? 0 : klen);
	uint32_t val_at = pos;
	if (pos + 4 > len) return fail(handle, "short record");
	uint32_t vlen = u32(in + pos);
	pos += 4 + (vlen == 0xFFFFFFFFu ? 0 : vlen);
	uint32_t hdr_at = pos; // headers run to the end of the record
	if (pos > len) return fail(handle, "short record");

	// Output layout (ABI.md 5.2): string topic ("" = the pipeline's output),
	// i32 partition (-1 = by key), key, value, headers — the key and headers
	// are byte-for-byte the record's, so they are copied as they are.
	uint32_t vmax = vlen == 0xFFFFFFFFu ? 0 : 3 * vlen;
	uint64_t max = 4 + 8 + (uint64_t)(val_at - key_at) + 4 + vmax + (len - hdr_at);
	if (max > 0xFFFFFFF0u || !grow(&out, &out_cap, (uint32_t)max)) return fail(handle, "out of memory");
	uint8_t *op = out + 4;
	put32(op, 0);
	put32(op + 4, 0xFFFFFFFFu);
	uint32_t o = 8;
	memcpy(op + o, in + key_at, val_at - key_at);
	o += val_at - key_at;
	if (vlen == 0xFFFFFFFFu) {
		put32(op + o, vlen);
		o += 4;
	} else {
		uint32_t n = to_upper(op + o + 4, in + val_at + 4, vlen);
		put32(op + o, n);
		o += 4 + n;
	}
	memcpy(op + o, in + hdr_at, len - hdr_at);
	o += len - hdr_at;
	*olen = o;
	return STATUS_OK;
}

EXPORT("wasmstream_on_record") int32_t on_record(uint32_t handle, uint32_t len) {
	if (!grow(&in, &in_cap, len)) return fail(handle, "out of memory");
	if (record_read(handle, in, len) != (int32_t)len) return fail(handle, "record_read failed");
	uint32_t olen;
	int32_t st = upper(handle, len, &olen);
	if (st != STATUS_OK) return st;
	if (emit(handle, out + 4, olen) < 0) return fail(handle, "emit failed");
	return STATUS_OK;
}

// The batch entry: each record_next hands over the record's status and its
// output as a one-entry output list (u32 length, then the output), and
// takes the next record; 0 means the batch is done.
EXPORT("wasmstream_on_batch_v1") int32_t on_batch(uint32_t first, uint32_t count, uint32_t max_len) {
	grow(&in, &in_cap, max_len); // on failure, each record tries again below
	int32_t st = STATUS_OK;
	uint32_t list_len = 0;
	for (uint32_t handle = first;; handle++) {
		int32_t n = record_next(st, out, list_len, in, in_cap);
		if (n <= 0) return 0;
		list_len = 0;
		if ((uint32_t)n > in_cap) { // not copied: read it into a larger buffer
			if (!grow(&in, &in_cap, (uint32_t)n)) { st = fail(handle, "out of memory"); continue; }
			if (record_read(handle, in, (uint32_t)n) != n) { st = fail(handle, "record_read failed"); continue; }
		}
		uint32_t olen = 0;
		st = upper(handle, (uint32_t)n, &olen);
		if (st == STATUS_OK) {
			put32(out, olen);
			list_len = 4 + olen;
		}
	}
}
