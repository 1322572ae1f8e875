// enrich.c — a wasmstream processor in C on the C SDK (abi/sdk/c/wasmstream.h):
// it adds to each record's JSON object where the record came from, as the
// Go enrich example does —
//
//   "source": {"topic": ..., "partition": ..., "offset": ..., "timestamp": ...},
//   "key": the record's key as a string (null when it has none), "attempt": n
//
// — written with the SDK's JSON writer (strings escaped, the object extended
// in place of splicing text), and emits it with the record's key and
// headers. A value that is not a JSON object is dead-lettered.
//
// Build (Debian: apt-get install clang lld wasi-libc libclang-rt-14-dev-wasm32):
//   clang --target=wasm32-wasi -O2 -mexec-model=reactor -o enrich.wasm enrich.c
#include "../../../abi/sdk/c/wasmstream.h"

// One writer for every record: its buffer is kept (an instance runs one
// record at a time).
static ws_json_w w;

WS_EXPORT("wasmstream_on_record") int32_t on_record(uint32_t handle, uint32_t len) {
	ws_record r;
	int32_t st = ws_read_record(handle, len, &r);
	if (st) return st;
	ws_bytes seen;
	if (ws_json_field(r.value, "source", &seen) == 1) return ws_error(handle, WS_FAIL, "value has a \"source\" already");
	ws_json_reset(&w);
	ws_json_begin_from(&w, r.value);
	ws_json_key(&w, "source");
	ws_json_begin_object(&w);
	ws_json_key(&w, "topic"), ws_json_bytes_string(&w, r.topic);
	ws_json_key(&w, "partition"), ws_json_int(&w, r.partition);
	ws_json_key(&w, "offset"), ws_json_int(&w, r.offset);
	ws_json_key(&w, "timestamp"), ws_json_int(&w, r.timestamp);
	ws_json_end_object(&w);
	ws_json_key(&w, "key"), ws_json_bytes_string(&w, r.key);
	ws_json_key(&w, "attempt"), ws_json_int(&w, r.attempt);
	ws_json_end_object(&w);
	if (w.err) return ws_error(handle, WS_FAIL, "value is not a JSON object");
	st = ws_emit(handle, r.key, ws_json_bytes(&w), r.headers, r.headers_len);
	return st ? st : WS_OK;
}
