package abi

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
	"unsafe"
)

func sampleRecord() Record {
	return Record{
		Offset: 42, Timestamp: 1700000000123, Partition: 3, Attempt: 2,
		Topic: "in", Key: []byte("k"), Value: []byte("hello"),
		Headers: []Header{{Key: "a", Value: []byte("1")}, {Key: "null", Value: nil}, {Key: "empty", Value: []byte{}}},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	r := sampleRecord()
	b := AppendRecord(nil, &r)
	if len(b) != RecordSize(&r) {
		t.Fatalf("RecordSize = %d, encoding is %d bytes", RecordSize(&r), len(b))
	}
	got, err := DecodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
	}
	if got.Headers[1].Value != nil || got.Headers[2].Value == nil {
		t.Fatal("null and empty header values must stay distinct")
	}
}

func TestNullKeyValue(t *testing.T) {
	r := Record{Topic: "t"}
	got, err := DecodeRecord(AppendRecord(nil, &r))
	if err != nil {
		t.Fatal(err)
	}
	if got.Key != nil || got.Value != nil {
		t.Fatalf("null key/value decoded as %q/%q", got.Key, got.Value)
	}
}

func TestOutputRoundTrip(t *testing.T) {
	o := Output{Topic: "", Partition: -1, Key: nil, Value: []byte("v"), Headers: []Header{{Key: "h", Value: []byte("x")}}}
	got, err := DecodeOutput(AppendOutput(nil, &o))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, o) {
		t.Fatalf("got %+v want %+v", got, o)
	}
}

func TestDecodeErrors(t *testing.T) {
	r := sampleRecord()
	b := AppendRecord(nil, &r)
	for n := 0; n < len(b); n++ {
		if _, err := DecodeRecord(b[:n]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("truncated at %d: err = %v", n, err)
		}
	}
	if _, err := DecodeRecord(append(bytes.Clone(b), 0)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("trailing byte: err = %v", err)
	}
	o := Output{Partition: -2}
	if _, err := DecodeOutput(AppendOutput(nil, &o)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("partition -2: err = %v", err)
	}
}

func FuzzDecodeOutput(f *testing.F) {
	o := Output{Topic: "x", Partition: 1, Key: []byte("k"), Value: []byte("v"), Headers: []Header{{Key: "h"}}}
	f.Add(AppendOutput(nil, &o))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := DecodeOutput(b)
		if err != nil {
			return
		}
		// Whatever decodes must re-encode to the same bytes.
		if re := AppendOutput(nil, &o); !bytes.Equal(re, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", re, b)
		}
	})
}

func FuzzDecodeRecord(f *testing.F) {
	r := sampleRecord()
	f.Add(AppendRecord(nil, &r))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			return
		}
		if re := AppendRecord(nil, &r); !bytes.Equal(re, b) {
			t.Fatalf("re-encoding differs")
		}
	})
}

// TestGoldenRecord pins the example encoding printed in ABI.md.
func TestGoldenRecord(t *testing.T) {
	r := Record{Offset: 42, Timestamp: 1700000000123, Partition: 3, Attempt: 1, Topic: "in", Key: []byte("k"), Value: []byte("hi")}
	const want = "2a00000000000000" + "7b68e5cf8b010000" + "03000000" + "01000000" +
		"02000000" + "696e" + "01000000" + "6b" + "02000000" + "6869" + "00000000"
	if got := hex.EncodeToString(AppendRecord(nil, &r)); got != want {
		t.Fatalf("encoding changed:\n got %s\nwant %s", got, want)
	}
}

// DecodeRecordInto keeps the topic string while records come from one
// topic (a guest allocates no string per record for it), and overwrites
// every field.
func TestDecodeRecordIntoReusesTopic(t *testing.T) {
	var r Record
	if err := DecodeRecordInto(AppendRecord(nil, &Record{Topic: "orders", Offset: 1, Key: []byte("k")}), &r); err != nil {
		t.Fatal(err)
	}
	first := unsafe.StringData(r.Topic)
	if err := DecodeRecordInto(AppendRecord(nil, &Record{Topic: "orders", Offset: 2}), &r); err != nil {
		t.Fatal(err)
	}
	if unsafe.StringData(r.Topic) != first || r.Offset != 2 || r.Key != nil {
		t.Fatalf("same topic: %+v (string reused: %v)", r, unsafe.StringData(r.Topic) == first)
	}
	if err := DecodeRecordInto(AppendRecord(nil, &Record{Topic: "payments", Offset: 3}), &r); err != nil || r.Topic != "payments" {
		t.Fatalf("other topic: %+v %v", r, err)
	}
	if n := testing.AllocsPerRun(100, func() { DecodeRecordInto(AppendRecord(make([]byte, 0, 64), &Record{Topic: "payments"}), &r) }); n > 1 {
		t.Fatalf("%v allocations per decode of a record from the same topic (1 is the encoding's buffer)", n)
	}
}

// TestHeaderCountBounds: what a guest hands the host (an output, an HTTP
// request) carries at most MaxHeaders headers; what the host hands a guest
// (a record, an HTTP response) carries what Kafka or the server gave.
func TestHeaderCountBounds(t *testing.T) {
	hs := func(n int) []Header { return make([]Header, n) }
	for _, n := range []int{MaxHeaders, MaxHeaders + 1} {
		ok := n <= MaxHeaders
		if _, err := DecodeOutput(AppendOutput(nil, &Output{Partition: -1, Headers: hs(n)})); (err == nil) != ok {
			t.Errorf("output with %d headers: %v", n, err)
		}
		if _, err := DecodeHTTPRequest(AppendHTTPRequest(nil, &HTTPRequest{URL: "http://x/", Headers: hs(n)})); (err == nil) != ok {
			t.Errorf("HTTP request with %d headers: %v", n, err)
		}
	}
	if r, err := DecodeRecord(AppendRecord(nil, &Record{Topic: "t", Headers: hs(5 * MaxHeaders)})); err != nil || len(r.Headers) != 5*MaxHeaders {
		t.Errorf("record with %d headers: %d, %v", 5*MaxHeaders, len(r.Headers), err)
	}
	if r, err := DecodeHTTPResponse(AppendHTTPResponse(nil, &HTTPResponse{Status: 200, Headers: hs(5 * MaxHeaders)})); err != nil || len(r.Headers) != 5*MaxHeaders {
		t.Errorf("HTTP response with %d headers: %d, %v", 5*MaxHeaders, len(r.Headers), err)
	}
}
