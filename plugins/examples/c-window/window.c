// A count per key and one-minute tumbling window with 10 s of grace, emitted
// once the window closes, over the raw event-time ABI of the C header
// (ABI.md §4.2): the sketch of docs/SDK.md, "Windows and timers". The Go and
// Rust SDKs have windows as a library (tumbling, hopping, late topics);
// this is what they do, written out for one kind of window.
//
// A window is the two-part state entry (record key, start as 8 bytes big
// endian) → its count (8 bytes big endian), and one timer (record key, end +
// grace) that closes it: the firing emits {"start","end","count"} with the
// key and deletes the entry, so a closed window leaves nothing. A record
// whose window has closed (stream time, its own timestamp counted, at or
// past end + grace) is late and dropped. The pipeline needs state.enabled
// and ordering: partition.
//
// Build: clang --target=wasm32-wasi -O2 -mexec-model=reactor -o window.wasm window.c
#include <stdio.h>

#include "../../../abi/sdk/c/wasmstream.h"

#define SIZE 60000  // ms
#define GRACE 10000 // ms

static void put_be64(uint8_t *b, uint64_t v) {
	for (int i = 7; i >= 0; i--) b[i] = (uint8_t)v, v >>= 8;
}

static uint64_t get_be64(const uint8_t *b) {
	uint64_t v = 0;
	for (int i = 0; i < 8; i++) v = v << 8 | b[i];
	return v;
}

// state_failure turns a host errno into the call's status: a limit is
// retried, the rest (a key over 1 KiB or of another partition, no state)
// cannot heal and is dead-lettered.
static int32_t state_failure(uint32_t handle, int32_t rc) {
	return ws_error(handle, rc == -5 ? WS_RETRY : WS_FAIL, rc == -5 ? "window: a limit" : "window: state refused (state.enabled? the record's key?)");
}

WS_EXPORT("wasmstream_on_record") int32_t on_record(uint32_t handle, uint32_t len) {
	ws_record r;
	int32_t st = ws_read_record(handle, len, &r);
	if (st) return st;
	if (r.timestamp < 0) return ws_error(handle, WS_FAIL, "window: negative timestamp");
	int64_t now;
	int32_t rc = stream_time(handle, &now);
	if (rc < 0) return state_failure(handle, rc);
	if (r.timestamp > now) now = r.timestamp; // Kafka Streams' stream time counts the record
	int64_t start = r.timestamp - r.timestamp % SIZE;
	if (start + SIZE + GRACE <= now) return WS_OK; // late: its window has closed
	uint8_t sub[8], val[8];
	put_be64(sub, (uint64_t)start);
	uint64_t n = 0;
	rc = state_get2(handle, r.key.p, r.key.len, sub, 8, val, 8);
	if (rc == 8) {
		n = get_be64(val);
	} else if (rc == -8) { // a new window: its timer
		rc = timer_set(handle, r.key.p, r.key.len, start + SIZE + GRACE);
		if (rc < 0) return state_failure(handle, rc);
	} else {
		return rc < 0 ? state_failure(handle, rc) : ws_error(handle, WS_FAIL, "window: a count is 8 bytes");
	}
	put_be64(val, n + 1);
	rc = state_put2(handle, r.key.p, r.key.len, sub, 8, val, 8);
	return rc < 0 ? state_failure(handle, rc) : WS_OK;
}

WS_EXPORT("wasmstream_on_timer") int32_t on_timer(uint32_t handle, uint32_t len) {
	ws_timer t;
	int32_t st = ws_read_timer(handle, len, &t);
	if (st) return st;
	int64_t start = t.at - GRACE - SIZE; // the window this timer closes
	uint8_t sub[8], val[8];
	put_be64(sub, (uint64_t)start);
	int32_t rc = state_get2(handle, t.key.p, t.key.len, sub, 8, val, 8);
	if (rc == -8) return WS_OK; // no such window
	if (rc != 8) return rc < 0 ? state_failure(handle, rc) : ws_error(handle, WS_FAIL, "window: a count is 8 bytes");
	if ((rc = state_delete2(handle, t.key.p, t.key.len, sub, 8)) < 0) return state_failure(handle, rc);
	char json[96];
	int n = snprintf(json, sizeof json, "{\"start\":%lld,\"end\":%lld,\"count\":%llu}", (long long)start, (long long)(start + SIZE), (unsigned long long)get_be64(val));
	ws_bytes value = {(const uint8_t *)json, (uint32_t)n, 0};
	static const uint8_t no_headers[4]; // the encoded header list: a count of 0
	st = ws_emit(handle, t.key, value, no_headers, sizeof no_headers);
	return st ? st : WS_OK;
}
