package conformance

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/wasmstream/wasmstream/abi"
)

// Vector is one input record of the kit, with the name a report gives it.
type Vector struct {
	Name   string
	Record abi.Record
}

// Traceparent is the W3C trace context the traceparent vector carries in,
// as a record produced by a traced client would (the guest sees it as a
// plain header and copies it like any other).
const Traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// LargeValueBytes is the size of the large vector's value: 210 KiB, over
// the 64 KiB and 128 KiB buffer sizes SDKs are tempted to hard-code.
const LargeValueBytes = 210 * 1024

// nonASCII is text whose upper-casing exercises the cases where languages
// differ from Go's bytes.ToUpper (simple case mapping): ß stays ß, ǅ
// becomes Ǆ, ᾳ becomes ᾼ, ﬀ stays ﬀ, ÿ becomes Ÿ, ı becomes I, and each
// byte of invalid UTF-8 (a lone 0xff, a truncated sequence, an encoded
// surrogate) becomes U+FFFD.
const nonASCII = "grüße, straße, ǅemal ǈ ǋ, ᾳ ῃ ῳ ᾀ, ﬀ ﬁ, ÿ é ı İ, привет мир, ἀλφα, Ωμέγα, 世界, 𐐨𐑀 😀, \xff\xfe broken \xe2\x82 utf-8 \xed\xa0\x80 surrogate"

// bytesRange is n bytes counting up from 0, wrapping.
func bytesRange(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// largeValue is LargeValueBytes of mixed ASCII and non-ASCII text, cut at a
// byte count (its last character may be truncated, which is invalid UTF-8
// too).
func largeValue() []byte {
	unit := []byte("the quick brown fox jumps over the lazy dog — ÿ é ß ǆ ﬁ Ω ж 世 ")
	return bytes.Repeat(unit, LargeValueBytes/len(unit)+1)[:LargeValueBytes]
}

// fiftyHeaders are 50 headers: repeated keys, null and empty values,
// non-ASCII keys and values, binary values.
func fiftyHeaders() []abi.Header {
	hs := make([]abi.Header, 0, 50)
	for i := 0; i < 50; i++ {
		h := abi.Header{Key: fmt.Sprintf("h-%02d", i), Value: []byte(fmt.Sprintf("value %d", i))}
		switch i % 7 {
		case 1:
			h.Value = nil
		case 2:
			h.Value = []byte{}
		case 3:
			h.Key = "ключ-" + h.Key
			h.Value = []byte("значение ü")
		case 4:
			h.Value = bytesRange(i)
		case 5:
			h.Key = "dup" // the same key several times, in order
		}
		hs = append(hs, h)
	}
	return hs
}

// Records are the input records every example is run on: null and empty
// keys and values, binary values, a 210 KiB value, 50 headers, null header
// values, non-ASCII text, an incoming traceparent, other topics,
// partitions, offsets and attempts.
func Records() []Vector {
	return []Vector{
		{"plain", abi.Record{Topic: "in", Key: []byte("k"), Value: []byte("hello, world"), Attempt: 1}},
		{"null-key-and-value", abi.Record{Topic: "in", Attempt: 1}},
		{"empty-key-and-value", abi.Record{Topic: "in", Key: []byte{}, Value: []byte{}, Attempt: 1}},
		{"null-key", abi.Record{Topic: "in", Value: []byte("no key, keep"), Attempt: 1}},
		{"null-value", abi.Record{Topic: "in", Key: []byte("no value"), Attempt: 1}},
		{"empty-value", abi.Record{Topic: "in", Key: []byte("empty value"), Value: []byte{}, Attempt: 1}},
		{"binary", abi.Record{Topic: "in", Key: []byte{0, 1, 2, 0xfe, 0xff}, Value: bytesRange(512), Partition: 7, Offset: 1 << 40, Timestamp: 1700000000123, Attempt: 1}},
		{"large-210KiB", abi.Record{Topic: "in", Key: []byte("large"), Value: largeValue(), Attempt: 1}},
		{"50-headers", abi.Record{Topic: "in", Key: []byte("headers"), Value: []byte("fifty headers, keep"), Headers: fiftyHeaders(), Attempt: 1}},
		{"null-header-values", abi.Record{Topic: "in", Key: []byte("nulls"), Value: []byte("v"), Headers: []abi.Header{{Key: "a"}, {Key: "b", Value: []byte{}}, {Key: "a"}}, Attempt: 1}},
		{"non-ascii", abi.Record{Topic: "другой-topic", Key: []byte("ключ ü"), Value: []byte(nonASCII), Headers: []abi.Header{{Key: "ünïcode", Value: []byte("värde")}}, Attempt: 1}},
		{"traceparent", abi.Record{Topic: "in", Key: []byte("traced"), Value: []byte("a traced record"), Attempt: 1,
			Headers: []abi.Header{{Key: "traceparent", Value: []byte(Traceparent)}, {Key: "tracestate", Value: []byte("rojo=00f067aa0ba902b7")}}}},
		{"retry-attempt", abi.Record{Topic: "orders.retry.10s", Key: []byte("again"), Value: []byte("third attempt"), Partition: 11, Offset: 99, Attempt: 3}},
		{"long-ascii", abi.Record{Topic: "a-longer-topic-name", Key: []byte("ascii"), Value: []byte(strings.Repeat("azAZ09{}`~@[", 1000)), Attempt: 1}},
	}
}

// filterRecords add records that select what the filter example keeps: a
// match header (null, empty, non-ASCII, repeated: the first wins).
func filterRecords() []Vector {
	m := func(v []byte) []abi.Header {
		return []abi.Header{{Key: "x", Value: []byte("y")}, {Key: "match", Value: v}}
	}
	return append(Records(),
		Vector{"filter-drop", abi.Record{Topic: "in", Key: []byte("k"), Value: []byte("drop me"), Attempt: 1}},
		Vector{"filter-match", abi.Record{Topic: "in", Key: []byte("k"), Value: []byte("needle in a haystack"), Headers: m([]byte("needle")), Attempt: 1}},
		Vector{"filter-no-match", abi.Record{Topic: "in", Key: []byte("k"), Value: []byte("keep, but no such word"), Headers: m([]byte("needle")), Attempt: 1}},
		Vector{"filter-null-match", abi.Record{Topic: "in", Key: []byte("k"), Value: []byte("anything"), Headers: m(nil), Attempt: 1}},
		Vector{"filter-empty-match-null-value", abi.Record{Topic: "in", Key: []byte("k"), Headers: m([]byte{}), Attempt: 1}},
		Vector{"filter-match-null-value", abi.Record{Topic: "in", Key: []byte("k"), Headers: m([]byte("x")), Attempt: 1}},
		Vector{"filter-first-match-wins", abi.Record{Topic: "in", Key: []byte{}, Value: []byte("ünïcode"), Headers: []abi.Header{{Key: "match", Value: []byte("ünï")}, {Key: "match", Value: []byte("zzz")}}, Attempt: 1}},
	)
}

// lookupRecords are the lookup example's records: every record of Records
// and keys the fake lookup service answers in each way (lookupAnswer).
func lookupRecords() []Vector {
	mode := func(m string) []abi.Header { return []abi.Header{{Key: "lookup.mode", Value: []byte(m)}} }
	return append(Records(),
		Vector{"lookup-json-value", abi.Record{Topic: "in", Key: []byte("json"), Value: []byte(` {"order": [1, 2.5e3, true, null, "x\u00e9"]} `), Partition: 1, Offset: 99, Attempt: 2}},
		Vector{"lookup-text-value", abi.Record{Topic: "in", Key: []byte("text"), Value: []byte("plain <text> & \"quotes\"\n\t\x01 é \xff \u2028"), Attempt: 1}},
		Vector{"lookup-escaped-key", abi.Record{Topic: "in", Key: []byte("a b/ç?&x;,$+:=@"), Value: []byte("{bad json"), Attempt: 4}},
		Vector{"lookup-404", abi.Record{Topic: "in", Key: []byte("gone-1"), Value: []byte(`"v"`), Attempt: 1}},
		Vector{"lookup-503-retry", abi.Record{Topic: "in", Key: []byte("fail-1"), Value: []byte(`"v"`), Attempt: 1}},
		Vector{"lookup-400-fail", abi.Record{Topic: "in", Key: []byte("bad-1"), Value: []byte(`"v"`), Attempt: 1}},
		Vector{"lookup-transport-error-retry", abi.Record{Topic: "in", Key: []byte("error-1"), Value: []byte(`"v"`), Attempt: 1}},
		Vector{"lookup-refused-fail", abi.Record{Topic: "in", Key: []byte("refused-1"), Value: []byte(`"v"`), Attempt: 1}},
		Vector{"lookup-chain", abi.Record{Topic: "in", Key: []byte("7"), Value: []byte(`"chained"`), Headers: mode("chain"), Attempt: 1}},
		Vector{"lookup-pending-without-operation", abi.Record{Topic: "in", Key: []byte("7"), Value: []byte(`"v"`), Headers: mode("pending"), Attempt: 1}},
	)
}

// VectorsOf returns the vectors the example is checked on.
func VectorsOf(example string) ([]Vector, error) {
	switch example {
	case "uppercase":
		return Records(), nil
	case "filter":
		return filterRecords(), nil
	case "lookup":
		return lookupRecords(), nil
	}
	return nil, fmt.Errorf("conformance: unknown example %q (want one of %s)", example, strings.Join(Examples, ", "))
}

// Examples are the examples the kit knows.
var Examples = []string{"uppercase", "filter", "lookup"}
