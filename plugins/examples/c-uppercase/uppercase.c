// uppercase.c — a wasmstream processor in C, written from abi/ABI.md alone:
// it emits each record with its value upper-cased, keeping key and headers.
//
// Build (Debian: apt-get install clang lld wasi-libc libclang-rt-14-dev-wasm32):
//   clang --target=wasm32-wasi -O2 -mexec-model=reactor -o uppercase.wasm uppercase.c
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define IMPORT(name) __attribute__((import_module("wasmstream_v1"), import_name(name)))
#define EXPORT(name) __attribute__((export_name(name)))

IMPORT("record_read") int32_t record_read(uint32_t handle, void *buf, uint32_t len);
IMPORT("emit") int32_t emit(uint32_t handle, const void *ptr, uint32_t len);
IMPORT("set_error") int32_t set_error(uint32_t handle, const void *ptr, uint32_t len);

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

// Record layout (ABI.md 5.1): i64 offset, i64 timestamp, i32 partition,
// u32 attempt, string topic, nullable key, nullable value, headers.
EXPORT("wasmstream_on_record") int32_t on_record(uint32_t handle, uint32_t len) {
	if (!grow(&in, &in_cap, len)) return fail(handle, "out of memory");
	if (record_read(handle, in, len) != (int32_t)len) return fail(handle, "record_read failed");
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
	// i32 partition (-1 = by key), key, value, headers — the key, value and
	// headers are byte-for-byte the record's, so they are copied as they are.
	uint32_t n = 4 + 4 + (len - key_at);
	if (!grow(&out, &out_cap, n)) return fail(handle, "out of memory");
	put32(out, 0);
	put32(out + 4, 0xFFFFFFFFu);
	memcpy(out + 8, in + key_at, len - key_at);
	if (vlen != 0xFFFFFFFFu) {
		uint8_t *v = out + 8 + (val_at - key_at) + 4;
		for (uint32_t i = 0; i < vlen; i++)
			if (v[i] >= 'a' && v[i] <= 'z') v[i] -= 'a' - 'A';
	}
	(void)hdr_at;
	if (emit(handle, out, n) < 0) return fail(handle, "emit failed");
	return STATUS_OK;
}
