// wasmstream.h — a small header for wasmstream processors in C (guest ABI
// v1, abi/ABI.md): the host functions, the statuses, a record reader, an
// output writer, a bounded reader of top-level JSON object fields and a
// JSON writer (ws_json_w) that escapes strings and extends an object.
// Include it in one .c file; build with
//   clang --target=wasm32-wasi -O2 -mexec-model=reactor -o proc.wasm proc.c
// Compiled natively (a unit test), the host functions are the test's: it
// defines record_read, emit and set_error.
#ifndef WASMSTREAM_H
#define WASMSTREAM_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __wasm__
#define WS_IMPORT(name) __attribute__((import_module("wasmstream_v1"), import_name(name)))
#define WS_EXPORT(name) __attribute__((export_name(name)))
#else
#define WS_IMPORT(name)
#define WS_EXPORT(name)
#endif

WS_IMPORT("record_read") int32_t record_read(uint32_t handle, void *buf, uint32_t len);
WS_IMPORT("emit") int32_t emit(uint32_t handle, const void *ptr, uint32_t len);
WS_IMPORT("set_error") int32_t set_error(uint32_t handle, const void *ptr, uint32_t len);

// What wasmstream_on_record returns (ABI.md §3): OK keeps what was emitted
// (nothing emitted: the record is dropped), RETRY is a retryable failure,
// FAIL a terminal one (the dead-letter topic).
enum { WS_OK = 0, WS_PENDING = 1, WS_RETRY = 2, WS_FAIL = 3 };

WS_EXPORT("wasmstream_abi_version") int32_t wasmstream_abi_version(void) { return 1; }

// Bytes that may be null (a null key or value).
typedef struct { const uint8_t *p; uint32_t len; int null; } ws_bytes;

// A record (ABI.md §5.1), pointing into a buffer the header owns until the
// next ws_read_record. headers is the encoded header list, as the record has it.
typedef struct {
	int64_t offset;    // in its partition
	int64_t timestamp; // milliseconds since the Unix epoch
	int32_t partition;
	uint32_t attempt; // 1 on the first attempt
	ws_bytes topic, key, value;
	const uint8_t *headers;
	uint32_t headers_len;
} ws_record;

static uint8_t *ws_in_, *ws_out_;
static uint32_t ws_in_cap_, ws_out_cap_;

static int ws_grow_(uint8_t **buf, uint32_t *cap, uint32_t need) {
	if (need <= *cap) return 1;
	uint8_t *b = realloc(*buf, need);
	if (!b) return 0;
	*buf = b, *cap = need;
	return 1;
}

static uint32_t ws_u32_(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

// ws_bytes_at_ reads nullable bytes at *pos; 0 when they run past len.
static int ws_bytes_at_(const uint8_t *b, uint32_t len, uint32_t *pos, ws_bytes *out) {
	if (len - *pos < 4 || *pos > len) return 0;
	uint32_t n = ws_u32_(b + *pos);
	*pos += 4;
	out->null = n == 0xFFFFFFFFu;
	if (out->null) n = 0;
	if (n > len - *pos) return 0;
	out->p = b + *pos, out->len = n;
	*pos += n;
	return 1;
}

// ws_error sets the record's error message and returns status (WS_FAIL or WS_RETRY).
static int32_t ws_error(uint32_t handle, int32_t status, const char *msg) {
	set_error(handle, msg, (uint32_t)strlen(msg));
	return status;
}

// ws_read_record reads the record of handle (len bytes); 0 on success, or a
// status with its error set.
static int32_t ws_read_record(uint32_t handle, uint32_t len, ws_record *r) {
	if (!ws_grow_(&ws_in_, &ws_in_cap_, len)) return ws_error(handle, WS_RETRY, "out of memory");
	if (record_read(handle, ws_in_, len) != (int32_t)len) return ws_error(handle, WS_FAIL, "record_read failed");
	uint32_t pos = 20; // offset, timestamp, partition
	if (len < 24) return ws_error(handle, WS_FAIL, "short record");
	memcpy(&r->offset, ws_in_, 8), memcpy(&r->timestamp, ws_in_ + 8, 8), memcpy(&r->partition, ws_in_ + 16, 4);
	r->attempt = ws_u32_(ws_in_ + pos);
	pos += 4;
	if (!ws_bytes_at_(ws_in_, len, &pos, &r->topic) || !ws_bytes_at_(ws_in_, len, &pos, &r->key) ||
	    !ws_bytes_at_(ws_in_, len, &pos, &r->value))
		return ws_error(handle, WS_FAIL, "short record");
	r->headers = ws_in_ + pos, r->headers_len = len - pos;
	return 0;
}

// ws_emit emits key, value and encoded headers (a record's) to the
// pipeline's output topic, partitioned by key (ABI.md §5.2); 0, or a status
// with its error set.
static int32_t ws_emit(uint32_t handle, ws_bytes key, ws_bytes value, const uint8_t *headers, uint32_t headers_len) {
	uint64_t n = 16 + (uint64_t)key.len + value.len + headers_len;
	if (n > 0xFFFFFFF0u || !ws_grow_(&ws_out_, &ws_out_cap_, (uint32_t)n)) return ws_error(handle, WS_RETRY, "out of memory");
	uint8_t *o = ws_out_;
	uint32_t none = 0xFFFFFFFFu, zero = 0, kl = key.null ? none : key.len, vl = value.null ? none : value.len;
	memcpy(o, &zero, 4), memcpy(o + 4, &none, 4), o += 8;
	memcpy(o, &kl, 4), memcpy(o + 4, key.p, key.len), o += 4 + key.len;
	memcpy(o, &vl, 4), memcpy(o + 4, value.p, value.len), o += 4 + value.len;
	memcpy(o, headers, headers_len), o += headers_len;
	if (emit(handle, ws_out_, (uint32_t)(o - ws_out_)) < 0) return ws_error(handle, WS_RETRY, "emit failed");
	return 0;
}

// ---- JSON: the top-level member of an object, bounded (not a validator) ----

#define WS_JSON_MAX_DEPTH 64

static void ws_json_ws_(const uint8_t *b, uint32_t n, uint32_t *i) {
	while (*i < n && (b[*i] == ' ' || b[*i] == '\t' || b[*i] == '\n' || b[*i] == '\r')) (*i)++;
}

static int ws_json_scalar_(int c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '+' || c == '.'; }

static int ws_json_str_(const uint8_t *b, uint32_t n, uint32_t *i) {
	if (*i >= n || b[*i] != '"') return 0;
	for ((*i)++; *i < n; (*i)++) {
		if (b[*i] == '"') { (*i)++; return 1; }
		if (b[*i] == '\\') (*i)++;
		else if (b[*i] < 0x20) return 0;
	}
	return 0;
}

// Skips one value, counting open brackets (no recursion).
static int ws_json_value_(const uint8_t *b, uint32_t n, uint32_t *i) {
	int depth = 0;
	for (;;) {
		ws_json_ws_(b, n, i);
		int c = *i < n ? b[*i] : -1;
		if (c == '"') { if (!ws_json_str_(b, n, i)) return 0; }
		else if (c == '{' || c == '[') { if (++depth > WS_JSON_MAX_DEPTH) return 0; (*i)++; continue; }
		else if ((c == '}' || c == ']') && depth > 0) { depth--; (*i)++; }
		else if (c >= 0 && ws_json_scalar_(c)) { while (*i < n && ws_json_scalar_(b[*i])) (*i)++; }
		else return 0;
		if (depth == 0) return 1;
		ws_json_ws_(b, n, i);
		c = *i < n ? b[*i] : -1;
		if (c == ',' || c == ':') (*i)++;
		else if (c != '}' && c != ']') return 0;
	}
}

// ws_json_field finds the top-level member key of the JSON object v (the
// first, when it repeats; keys compared as written): 1 and its raw value in
// *out, 0 when absent, -1 when v is not a readable JSON object.
static int ws_json_field(ws_bytes v, const char *key, ws_bytes *out) {
	const uint8_t *b = v.p;
	uint32_t n = v.len, i = 0, klen = (uint32_t)strlen(key);
	if (v.null) return -1;
	ws_json_ws_(b, n, &i);
	if (i >= n || b[i++] != '{') return -1;
	ws_json_ws_(b, n, &i);
	if (i < n && b[i] == '}') return 0;
	for (;;) {
		ws_json_ws_(b, n, &i);
		uint32_t ks = i + 1;
		if (!ws_json_str_(b, n, &i)) return -1;
		uint32_t ke = i - 1;
		ws_json_ws_(b, n, &i);
		if (i >= n || b[i++] != ':') return -1;
		ws_json_ws_(b, n, &i);
		uint32_t start = i;
		if (!ws_json_value_(b, n, &i)) return -1;
		if (ke - ks == klen && memcmp(b + ks, key, klen) == 0) {
			out->p = b + start, out->len = i - start, out->null = 0;
			return 1;
		}
		ws_json_ws_(b, n, &i);
		if (i >= n) return -1;
		if (b[i] == '}') return 0;
		if (b[i++] != ',') return -1;
	}
}

// ws_json_number reads a raw JSON value as a number: 1, or 0 when it is not one.
static int ws_json_number(ws_bytes raw, double *d) {
	char buf[64];
	if (raw.len == 0 || raw.len >= sizeof buf || !(raw.p[0] == '-' || (raw.p[0] >= '0' && raw.p[0] <= '9'))) return 0;
	for (uint32_t i = 0; i < raw.len; i++) {
		int c = raw.p[i];
		if (!((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E')) return 0;
	}
	memcpy(buf, raw.p, raw.len);
	buf[raw.len] = 0;
	char *end;
	*d = strtod(buf, &end);
	return end == buf + raw.len;
}

// ---- JSON: a writer ----
// ws_json_w writes one JSON document into a buffer it owns, escaping
// strings and placing the commas and colons; a failure (out of memory,
// nesting past WS_JSON_MAX_DEPTH, a member without a key, a document that
// is not an object where one must be) sets err, and every later call does
// nothing. To enrich a record's JSON object, start from it:
//
//   ws_json_w w = {0};
//   ws_json_begin_from(&w, r.value);          // its members, the object left open
//   ws_json_key(&w, "partition"), ws_json_int(&w, r.partition);
//   ws_json_end_object(&w);
//   if (w.err) return ws_error(handle, WS_FAIL, "value is not a JSON object");
//   ws_emit(handle, r.key, ws_json_bytes(&w), r.headers, r.headers_len);
//
// Reuse one writer across records with ws_json_reset (its buffer is kept).
typedef struct {
	uint8_t *p;
	uint32_t len, cap;
	int err;
	int depth;
	uint8_t first[WS_JSON_MAX_DEPTH + 1]; // no member yet at this depth
	uint8_t in_object[WS_JSON_MAX_DEPTH + 1];
	int after_key; // a key was written: its value is next
} ws_json_w;

static void ws_json_reset(ws_json_w *w) { w->len = 0, w->err = 0, w->depth = 0, w->after_key = 0, w->first[0] = 1, w->in_object[0] = 0; }

// ws_json_free releases the writer's buffer.
static void ws_json_free(ws_json_w *w) { free(w->p), w->p = NULL, w->cap = 0, ws_json_reset(w); }

// ws_json_bytes is the document written (in the writer's buffer, until its
// next call); null after a failure.
static ws_bytes ws_json_bytes(const ws_json_w *w) {
	ws_bytes b = {w->p, w->len, w->err || w->len == 0};
	if (b.null) b.p = NULL, b.len = 0;
	return b;
}

static void ws_json_put_(ws_json_w *w, const void *p, uint32_t n) {
	if (w->err) return;
	if ((uint64_t)w->len + n > 0xFFFFFFF0u) { w->err = 1; return; }
	if (w->len + n > w->cap) {
		uint32_t cap = w->cap ? w->cap : 256;
		while (cap < w->len + n) cap = cap > 0x7FFFFFF0u ? w->len + n : 2 * cap;
		if (!ws_grow_(&w->p, &w->cap, cap)) { w->err = 1; return; }
	}
	memcpy(w->p + w->len, p, n), w->len += n;
}

// ws_json_sep_ places what comes before a value: a comma between array
// items, nothing after a key; a value in an object needs its key first.
static void ws_json_sep_(ws_json_w *w) {
	if (w->err) return;
	if (w->len == 0 && w->depth == 0) w->first[0] = 1, w->in_object[0] = 0;
	if (w->after_key) { w->after_key = 0; return; }
	if (w->in_object[w->depth]) { w->err = 1; return; } // a member without a key
	if (w->depth == 0 && w->len > 0) { w->err = 1; return; } // a second document
	if (!w->first[w->depth]) ws_json_put_(w, ",", 1);
	w->first[w->depth] = 0;
}

static void ws_json_open_(ws_json_w *w, char c, int object) {
	ws_json_sep_(w);
	if (w->err) return;
	if (w->depth == WS_JSON_MAX_DEPTH) { w->err = 1; return; }
	ws_json_put_(w, &c, 1);
	w->depth++, w->first[w->depth] = 1, w->in_object[w->depth] = (uint8_t)object;
}

static void ws_json_close_(ws_json_w *w, char c, int object) {
	if (w->err) return;
	if (w->depth == 0 || w->in_object[w->depth] != object || w->after_key) { w->err = 1; return; }
	ws_json_put_(w, &c, 1);
	w->depth--;
}

static void ws_json_begin_object(ws_json_w *w) { ws_json_open_(w, '{', 1); }
static void ws_json_end_object(ws_json_w *w) { ws_json_close_(w, '}', 1); }
static void ws_json_begin_array(ws_json_w *w) { ws_json_open_(w, '[', 0); }
static void ws_json_end_array(ws_json_w *w) { ws_json_close_(w, ']', 0); }

// ws_json_string_n_ writes s (n bytes, UTF-8 as it is) as a JSON string.
static void ws_json_string_n_(ws_json_w *w, const uint8_t *s, uint32_t n) {
	static const char hex[] = "0123456789abcdef";
	ws_json_put_(w, "\"", 1);
	uint32_t run = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint8_t c = s[i];
		if (c >= 0x20 && c != '"' && c != '\\') continue;
		ws_json_put_(w, s + run, i - run), run = i + 1;
		char e[6] = {'\\', (char)c, 0, 0, 0, 0};
		uint32_t el = 2;
		switch (c) {
		case '"': case '\\': break;
		case '\n': e[1] = 'n'; break;
		case '\r': e[1] = 'r'; break;
		case '\t': e[1] = 't'; break;
		default: e[1] = 'u', e[2] = '0', e[3] = '0', e[4] = hex[c >> 4], e[5] = hex[c & 15], el = 6;
		}
		ws_json_put_(w, e, el);
	}
	ws_json_put_(w, s + run, n - run);
	ws_json_put_(w, "\"", 1);
}

// ws_json_key writes an object member's key (escaped); its value is next.
static void ws_json_key_n(ws_json_w *w, const char *key, uint32_t n) {
	if (w->err) return;
	if (!w->in_object[w->depth] || w->after_key) { w->err = 1; return; }
	if (!w->first[w->depth]) ws_json_put_(w, ",", 1);
	w->first[w->depth] = 0;
	ws_json_string_n_(w, (const uint8_t *)key, n);
	ws_json_put_(w, ":", 1);
	w->after_key = 1;
}
static void ws_json_key(ws_json_w *w, const char *key) { ws_json_key_n(w, key, (uint32_t)strlen(key)); }

// ws_json_string writes a string value (escaped); ws_json_bytes_string
// writes bytes as one (a null as null).
static void ws_json_string(ws_json_w *w, const char *s) { ws_json_sep_(w), ws_json_string_n_(w, (const uint8_t *)s, (uint32_t)strlen(s)); }
static void ws_json_null(ws_json_w *w) { ws_json_sep_(w), ws_json_put_(w, "null", 4); }
static void ws_json_bytes_string(ws_json_w *w, ws_bytes b) {
	if (b.null) { ws_json_null(w); return; }
	ws_json_sep_(w), ws_json_string_n_(w, b.p, b.len);
}
static void ws_json_bool(ws_json_w *w, int v) { ws_json_sep_(w), ws_json_put_(w, v ? "true" : "false", v ? 4 : 5); }

// ws_json_int writes an integer (exact: an offset or a timestamp).
static void ws_json_int(ws_json_w *w, int64_t v) {
	char b[24], *e = b + sizeof b, *p = e;
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	do *--p = (char)('0' + u % 10), u /= 10; while (u);
	if (v < 0) *--p = '-';
	ws_json_sep_(w), ws_json_put_(w, p, (uint32_t)(e - p));
}

// ws_json_raw writes raw, a JSON value as it is (one read with
// ws_json_field, say): not checked, so it must be JSON.
static void ws_json_raw(ws_json_w *w, ws_bytes raw) {
	if (raw.null) { ws_json_null(w); return; }
	ws_json_sep_(w), ws_json_put_(w, raw.p, raw.len);
}

// ws_json_object_end_ reads v as one JSON object (bounded as
// ws_json_field reads, not a validator of scalars) with nothing but
// whitespace after it: the index of its closing brace, or -1.
static int64_t ws_json_object_end_(ws_bytes v) {
	const uint8_t *b = v.p;
	uint32_t n = v.len, i = 0;
	if (v.null) return -1;
	ws_json_ws_(b, n, &i);
	if (i >= n || b[i++] != '{') return -1;
	ws_json_ws_(b, n, &i);
	if (i >= n) return -1;
	if (b[i] != '}') {
		for (;;) {
			ws_json_ws_(b, n, &i);
			if (!ws_json_str_(b, n, &i)) return -1;
			ws_json_ws_(b, n, &i);
			if (i >= n || b[i++] != ':') return -1;
			if (!ws_json_value_(b, n, &i)) return -1;
			ws_json_ws_(b, n, &i);
			if (i >= n) return -1;
			if (b[i] == '}') break;
			if (b[i++] != ',') return -1;
		}
	}
	uint32_t close = i++;
	ws_json_ws_(b, n, &i);
	return i == n ? (int64_t)close : -1;
}

// ws_json_begin_from writes the members of the JSON object obj and leaves
// the object open for more: end it with ws_json_end_object. obj not one
// JSON object sets err. A member written after it with a key obj has
// already makes the key repeat: look for it first (ws_json_field).
static void ws_json_begin_from(ws_json_w *w, ws_bytes obj) {
	int64_t close = ws_json_object_end_(obj);
	if (close < 0) { w->err = 1; return; }
	uint32_t body = 0, end = (uint32_t)close;
	ws_json_ws_(obj.p, end, &body);
	body++; // the opening brace
	ws_json_ws_(obj.p, end, &body);
	while (end > body && (obj.p[end - 1] == ' ' || obj.p[end - 1] == '\t' || obj.p[end - 1] == '\n' || obj.p[end - 1] == '\r')) end--;
	ws_json_open_(w, '{', 1);
	if (w->err || end == body) return;
	ws_json_put_(w, obj.p + body, end - body);
	w->first[w->depth] = 0;
}

// ---- State (ABI.md §4.1): a pipeline with state.enabled ----

WS_IMPORT("state_get") int32_t state_get(uint32_t handle, const void *key, uint32_t key_len, void *buf, uint32_t buf_len);
WS_IMPORT("state_put") int32_t state_put(uint32_t handle, const void *key, uint32_t key_len, const void *val, uint32_t val_len);

static uint8_t *ws_state_buf_;
static uint32_t ws_state_cap_;

// ws_state_get reads key's value into *val (a buffer the header owns until
// the next ws_state_get): 1 when found, 0 when the key has no value, or the
// host's negative errno (-9 too large, -10 a key of another partition, -11
// no state: ABI.md §4).
static int32_t ws_state_get(uint32_t handle, ws_bytes key, ws_bytes *val) {
	int32_t n = state_get(handle, key.p, key.len, ws_state_buf_, ws_state_cap_);
	if (n > (int32_t)ws_state_cap_) {
		if (!ws_grow_(&ws_state_buf_, &ws_state_cap_, (uint32_t)n)) return -5;
		n = state_get(handle, key.p, key.len, ws_state_buf_, ws_state_cap_);
	}
	if (n == -8) return 0;
	if (n < 0) return n;
	val->p = ws_state_buf_, val->len = (uint32_t)n, val->null = 0;
	return 1;
}

// ws_state_put sets key to val for the record: 0, or the host's negative errno.
static int32_t ws_state_put(uint32_t handle, ws_bytes key, ws_bytes val) {
	return state_put(handle, key.p, key.len, val.p, val.len);
}

// ---- Event time (ABI.md §4.2): two-part keys, stream time, timers ----
// The raw host functions, for a pipeline with state.enabled (and ordering:
// partition for timers). Only key is checked against the record's
// partition; sub is any bytes up to 1024 (the empty sub is a sub), a
// namespace apart from the one-part keys. Return values as state_get,
// state_put, state_delete and state_scan (§4.1); stream_time writes the
// partition's stream time (the largest timestamp decided so far, -1 before
// any; not the record in progress) as 8 bytes little-endian at out.
// timer_set(key, at) asks for a call of wasmstream_on_timer once stream
// time reaches at (ms); (key, at) is one timer, a state write of the call.
// A module that imports timer_set must export the timer entry, called
// like wasmstream_on_record with the firing's handle and length:
//
//   WS_EXPORT("wasmstream_on_timer") int32_t on_timer(uint32_t handle, uint32_t len)
//
// where ws_read_timer reads the firing. It returns WS_OK, WS_RETRY or
// WS_FAIL (never WS_PENDING: a firing cannot wait). An import the module
// does not call is not linked in.

WS_IMPORT("state_get2") int32_t state_get2(uint32_t handle, const void *key, uint32_t key_len, const void *sub, uint32_t sub_len, void *buf, uint32_t buf_len);
WS_IMPORT("state_put2") int32_t state_put2(uint32_t handle, const void *key, uint32_t key_len, const void *sub, uint32_t sub_len, const void *val, uint32_t val_len);
WS_IMPORT("state_delete2") int32_t state_delete2(uint32_t handle, const void *key, uint32_t key_len, const void *sub, uint32_t sub_len);
WS_IMPORT("state_scan2") int32_t state_scan2(uint32_t handle, const void *key, uint32_t key_len, const void *prefix, uint32_t prefix_len, const void *after, uint32_t after_len, void *buf, uint32_t buf_len);
WS_IMPORT("stream_time") int32_t stream_time(uint32_t handle, int64_t *out);
WS_IMPORT("timer_set") int32_t timer_set(uint32_t handle, const void *key, uint32_t key_len, int64_t at);
WS_IMPORT("timer_delete") int32_t timer_delete(uint32_t handle, const void *key, uint32_t key_len, int64_t at);

// A timer firing (ABI.md §4.2, "The firing's encoding"). topic and key
// point into a buffer the header owns until the next ws_read_timer or
// ws_read_record.
typedef struct {
	int64_t at, stream_time;
	int32_t partition;
	uint32_t attempt;
	ws_bytes topic, key;
} ws_timer;

// ws_read_timer reads the firing of handle (len bytes: wasmstream_on_timer's
// arguments); 0 on success, or a status to return (the error set).
static int32_t ws_read_timer(uint32_t handle, uint32_t len, ws_timer *t) {
	if (!ws_grow_(&ws_in_, &ws_in_cap_, len)) return ws_error(handle, WS_RETRY, "out of memory");
	if (record_read(handle, ws_in_, len) != (int32_t)len) return ws_error(handle, WS_FAIL, "record_read failed");
	uint32_t pos = 24; // at, stream_time, partition, attempt
	if (len < pos) return ws_error(handle, WS_FAIL, "short timer firing");
	memcpy(&t->at, ws_in_, 8), memcpy(&t->stream_time, ws_in_ + 8, 8), memcpy(&t->partition, ws_in_ + 16, 4);
	t->attempt = ws_u32_(ws_in_ + 20);
	if (!ws_bytes_at_(ws_in_, len, &pos, &t->topic) || !ws_bytes_at_(ws_in_, len, &pos, &t->key) || pos != len)
		return ws_error(handle, WS_FAIL, "malformed timer firing");
	return 0;
}

// ---- Asynchronous HTTP (ABI.md §7) ----
// A module that calls ws_http_get must export wasmstream_on_complete:
//
//   WS_EXPORT("wasmstream_on_complete") int32_t on_complete(uint32_t handle, uint32_t op, uint32_t len)
//
// wasmstream_on_record starts the request and returns WS_PENDING; the host
// calls wasmstream_on_complete with the response, where ws_read_result reads
// it and ws_read_pending_record the record again.

WS_IMPORT("async_start") int32_t async_start(uint32_t handle, int32_t kind, const void *req, uint32_t req_len);
WS_IMPORT("result_read") int32_t result_read(uint32_t op, void *buf, uint32_t buf_len);

// The length of each waiting record, by handle: a completion call's len is
// its result's, and record_read needs the record's.
typedef struct { uint32_t handle, len; } ws_pending_;
static ws_pending_ *ws_pending_list_;
static uint32_t ws_pending_n_, ws_pending_cap_;

// ws_http_get starts a GET of url (url_len bytes) for the record handle of
// len bytes (wasmstream_on_record's arguments). Returns the operation id
// (> 0), or the host's negative errno (-5: the record has
// async.max_per_record operations outstanding).
static int32_t ws_http_get(uint32_t handle, uint32_t len, const char *url, uint32_t url_len) {
	uint64_t n = 4 + (uint64_t)url_len + 4 + 4 + 4 + 4; // method, url, headers, body, timeout_ms
	if (n > 0xFFFFFFF0u || !ws_grow_(&ws_out_, &ws_out_cap_, (uint32_t)n)) return -5;
	uint8_t *o = ws_out_;
	uint32_t zero = 0, none = 0xFFFFFFFFu;
	memcpy(o, &zero, 4), o += 4;                                  // method "": GET
	memcpy(o, &url_len, 4), memcpy(o + 4, url, url_len), o += 4 + url_len;
	memcpy(o, &zero, 4), memcpy(o + 4, &none, 4), memcpy(o + 8, &zero, 4), o += 12; // no headers, no body, the pipeline's timeout
	if (ws_pending_n_ == ws_pending_cap_) {
		uint32_t cap = ws_pending_cap_ ? 2 * ws_pending_cap_ : 16;
		ws_pending_ *l = realloc(ws_pending_list_, cap * sizeof *l);
		if (!l) return -5;
		ws_pending_list_ = l, ws_pending_cap_ = cap;
	}
	int32_t op = async_start(handle, 2, ws_out_, (uint32_t)(o - ws_out_));
	if (op <= 0) return op;
	for (uint32_t i = 0; i < ws_pending_n_; i++) {
		if (ws_pending_list_[i].handle == handle) { // the same record again, or one whose completion never came
			ws_pending_list_[i].len = len;
			return op;
		}
	}
	ws_pending_list_[ws_pending_n_++] = (ws_pending_){handle, len};
	return op;
}

// ws_read_pending_record reads the record of a completion call again and
// forgets its length (it is decided by this call; a continuation that starts
// another request remembers it again with ws_http_get). Call it in every
// completion call, a canceled one's too (code 2: the record is gone, the
// read fails, and its length is forgotten).
static int32_t ws_read_pending_record(uint32_t handle, ws_record *r) {
	for (uint32_t i = 0; i < ws_pending_n_; i++) {
		if (ws_pending_list_[i].handle == handle) {
			uint32_t len = ws_pending_list_[i].len;
			ws_pending_list_[i] = ws_pending_list_[--ws_pending_n_];
			return ws_read_record(handle, len, r);
		}
	}
	return ws_error(handle, WS_FAIL, "a completion for a record not waiting");
}

// A completed operation: code 0 (ok), 1 (error: transport, timeout), 2
// (canceled: the record was decided first) or 3 (refused by policy, e.g. a
// host not in async.http.allow_hosts). For an ok HTTP request, status and
// body; otherwise message.
typedef struct {
	int code;
	int32_t status;
	ws_bytes body, message;
} ws_http_response;

static uint8_t *ws_res_;
static uint32_t ws_res_cap_;

// ws_read_result reads the result of op (len bytes: wasmstream_on_complete's
// arguments) into *resp, pointing into a buffer the header owns until the
// next call; 0, or -1 when it is malformed.
static int ws_read_result(uint32_t op, uint32_t len, ws_http_response *resp) {
	if (len < 1 || !ws_grow_(&ws_res_, &ws_res_cap_, len) || result_read(op, ws_res_, len) != (int32_t)len) return -1;
	uint32_t pos = 1;
	memset(resp, 0, sizeof *resp);
	resp->code = ws_res_[0];
	if (resp->code != 0) {
		if (!ws_bytes_at_(ws_res_, len, &pos, &resp->message)) return -1;
		return 0;
	}
	if (len - pos < 8) return -1;
	memcpy(&resp->status, ws_res_ + pos, 4), pos += 4;
	uint32_t nh = ws_u32_(ws_res_ + pos);
	pos += 4;
	for (uint32_t i = 0; i < nh; i++) { // headers: skipped
		ws_bytes k, v;
		if (!ws_bytes_at_(ws_res_, len, &pos, &k) || !ws_bytes_at_(ws_res_, len, &pos, &v)) return -1;
	}
	if (!ws_bytes_at_(ws_res_, len, &pos, &resp->body)) return -1;
	return 0;
}

#endif
