// wasmstream_test.c — the C SDK's unit test, compiled natively (the host
// functions are this file's): the record reader's fields and the JSON
// writer, its output and its refusals. Build and run:
//   clang -O1 -Wall -o wasmstream_test wasmstream_test.c && ./wasmstream_test
// (cmd/wasmstream's TestCSDK does, in the test command.) Exit status: the
// number of failed checks.
#include <stdio.h>

#include "wasmstream.h"

// The record the host functions serve, and what the guest set.
static uint8_t rec[256];
static uint32_t rec_len;
static char last_error[256];

int32_t record_read(uint32_t handle, void *buf, uint32_t len) {
	(void)handle;
	if (len > rec_len) len = rec_len;
	memcpy(buf, rec, len);
	return (int32_t)len;
}
int32_t emit(uint32_t handle, const void *ptr, uint32_t len) { (void)handle, (void)ptr; return (int32_t)len; }
int32_t set_error(uint32_t handle, const void *ptr, uint32_t len) {
	(void)handle;
	if (len >= sizeof last_error) len = sizeof last_error - 1;
	memcpy(last_error, ptr, len), last_error[len] = 0;
	return 0;
}
int32_t state_get(uint32_t h, const void *k, uint32_t kl, void *b, uint32_t bl) { (void)h, (void)k, (void)kl, (void)b, (void)bl; return -11; }
int32_t state_put(uint32_t h, const void *k, uint32_t kl, const void *v, uint32_t vl) { (void)h, (void)k, (void)kl, (void)v, (void)vl; return -11; }
int32_t async_start(uint32_t h, int32_t kind, const void *r, uint32_t l) { (void)h, (void)kind, (void)r, (void)l; return -1; }
int32_t result_read(uint32_t op, void *b, uint32_t l) { (void)op, (void)b, (void)l; return -1; }

static int failed;

#define CHECK(cond, ...) do { if (!(cond)) { failed++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

static void check_doc(ws_json_w *w, const char *want, int line) {
	ws_bytes b = ws_json_bytes(w);
	if (w->err || b.null || b.len != strlen(want) || memcmp(b.p, want, b.len) != 0) {
		failed++;
		printf("FAIL line %d: err %d, got %.*s, want %s\n", line, w->err, (int)b.len, b.null ? "" : (const char *)b.p, want);
	}
}

static ws_bytes str(const char *s) { return (ws_bytes){(const uint8_t *)s, (uint32_t)strlen(s), 0}; }

// ABI.md §5.1's example: offset 42, timestamp 1700000000123, partition 3,
// attempt 1, topic "in", key "k", value "hi", no headers.
static void test_record(void) {
	static const uint8_t golden[] = {
		0x2a, 0, 0, 0, 0, 0, 0, 0, 0x7b, 0x68, 0xe5, 0xcf, 0x8b, 0x01, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0,
		2, 0, 0, 0, 'i', 'n', 1, 0, 0, 0, 'k', 2, 0, 0, 0, 'h', 'i', 0, 0, 0, 0};
	memcpy(rec, golden, sizeof golden), rec_len = sizeof golden;
	ws_record r;
	CHECK(ws_read_record(1, rec_len, &r) == 0, "read: %s", last_error);
	CHECK(r.offset == 42 && r.timestamp == 1700000000123LL && r.partition == 3 && r.attempt == 1,
	      "offset %lld timestamp %lld partition %d attempt %u", (long long)r.offset, (long long)r.timestamp, r.partition, r.attempt);
	CHECK(r.topic.len == 2 && memcmp(r.topic.p, "in", 2) == 0 && r.key.len == 1 && r.value.len == 2 && r.headers_len == 4, "fields");
	CHECK(ws_read_record(1, 20, &r) == WS_FAIL && strcmp(last_error, "short record") == 0, "a short record: %s", last_error);
}

static void test_writer(void) {
	ws_json_w w = {0};
	ws_json_begin_object(&w);
	ws_json_key(&w, "s"), ws_json_string(&w, "a\"b\\c\n\x01\x7f é");
	ws_json_key(&w, "n"), ws_json_int(&w, INT64_MIN);
	ws_json_key(&w, "m"), ws_json_int(&w, 0);
	ws_json_key(&w, "t"), ws_json_bool(&w, 1);
	ws_json_key(&w, "z"), ws_json_null(&w);
	ws_json_key(&w, "list"), ws_json_begin_array(&w);
	ws_json_int(&w, 1), ws_json_begin_object(&w), ws_json_end_object(&w), ws_json_begin_array(&w), ws_json_end_array(&w);
	ws_json_raw(&w, str("{\"r\":[true]}"));
	ws_json_bytes_string(&w, (ws_bytes){0, 0, 1});
	ws_json_end_array(&w);
	ws_json_key(&w, "k\"ey"), ws_json_int(&w, 9007199254740993LL);
	ws_json_end_object(&w);
	check_doc(&w, "{\"s\":\"a\\\"b\\\\c\\n\\u0001\x7f é\",\"n\":-9223372036854775808,\"m\":0,\"t\":true,\"z\":null,"
	              "\"list\":[1,{},[],{\"r\":[true]},null],\"k\\\"ey\":9007199254740993}", __LINE__);

	// Extending an object: its members kept as written, the new ones after.
	const char *objs[][2] = {
		{"{\"a\": 1 , \"b\":[1,2]}", "{\"a\": 1 , \"b\":[1,2],\"x\":1}"},
		{" { } ", "{\"x\":1}"},
		{"{\n}\n", "{\"x\":1}"},
	};
	for (unsigned i = 0; i < sizeof objs / sizeof objs[0]; i++) {
		ws_json_reset(&w);
		ws_json_begin_from(&w, str(objs[i][0]));
		ws_json_key(&w, "x"), ws_json_int(&w, 1);
		ws_json_end_object(&w);
		check_doc(&w, objs[i][1], __LINE__);
	}

	// Refused: each sets err, and the document is null.
	const char *notObjects[] = {"", "[]", "\"s\"", "{\"a\":1} {\"b\":2}", "{\"a\":1,}", "{\"a\" 1}", "{\"a\":1"};
	for (unsigned i = 0; i < sizeof notObjects / sizeof notObjects[0]; i++) {
		ws_json_reset(&w);
		ws_json_begin_from(&w, str(notObjects[i]));
		ws_json_end_object(&w);
		CHECK(w.err && ws_json_bytes(&w).null, "begin_from %s: err %d", notObjects[i], w.err);
	}
	ws_json_reset(&w), ws_json_begin_from(&w, (ws_bytes){0, 0, 1});
	CHECK(w.err, "begin_from null");

	ws_json_reset(&w), ws_json_begin_object(&w), ws_json_int(&w, 1); // a member without a key
	CHECK(w.err, "a value without a key");
	ws_json_reset(&w), ws_json_begin_array(&w), ws_json_key(&w, "k"); // a key in an array
	CHECK(w.err, "a key in an array");
	ws_json_reset(&w), ws_json_begin_object(&w), ws_json_key(&w, "k"), ws_json_end_object(&w); // a key without a value
	CHECK(w.err, "a key without a value");
	ws_json_reset(&w), ws_json_begin_object(&w), ws_json_end_array(&w);
	CHECK(w.err, "an object closed as an array");
	ws_json_reset(&w), ws_json_end_object(&w);
	CHECK(w.err, "a close without an open");
	ws_json_reset(&w), ws_json_int(&w, 1), ws_json_int(&w, 2);
	CHECK(w.err, "two documents");
	ws_json_reset(&w);
	for (int i = 0; i <= WS_JSON_MAX_DEPTH; i++) ws_json_begin_array(&w);
	CHECK(w.err, "nested past WS_JSON_MAX_DEPTH");
	ws_json_reset(&w);
	for (int i = 0; i < WS_JSON_MAX_DEPTH; i++) ws_json_begin_array(&w);
	for (int i = 0; i < WS_JSON_MAX_DEPTH; i++) ws_json_end_array(&w);
	CHECK(!w.err && w.len == 2 * WS_JSON_MAX_DEPTH, "nested to WS_JSON_MAX_DEPTH: err %d", w.err);

	// After a refusal, reset starts again, the buffer kept.
	ws_json_reset(&w), ws_json_string(&w, "again");
	check_doc(&w, "\"again\"", __LINE__);
	ws_json_free(&w);
	CHECK(w.p == NULL && w.cap == 0, "free");
}

int main(void) {
	test_record();
	test_writer();
	if (failed == 0) printf("ok\n");
	return failed;
}
