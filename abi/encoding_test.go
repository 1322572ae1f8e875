package abi

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"slices"
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

// decodeRecordFast (DecodeRecordInto's path for records without headers)
// decodes what the decoder decodes, and leaves to it everything else: the
// encodings of records of every shape, each cut short at every length and
// with a byte past its end, decode the same both ways (same error or none,
// same record: null stays null, capacities capped).
func TestDecodeRecordFastSameAsDecoder(t *testing.T) {
	recs := []Record{
		{Topic: "in", Offset: 7, Timestamp: -1, Partition: 2, Attempt: 3, Key: []byte("k"), Value: []byte("v")},
		{Topic: "", Key: nil, Value: nil},
		{Topic: "t", Key: []byte{}, Value: []byte{}},
		{Topic: "topic", Key: []byte("key"), Value: []byte("value"), Headers: []Header{{Key: "h", Value: []byte("x")}}},
	}
	slow := func(b []byte) (Record, error) {
		var r Record
		d := decoder{b: b}
		r.Offset, r.Timestamp = int64(d.u64()), int64(d.u64())
		r.Partition, r.Attempt = int32(d.u32()), d.u32()
		r.Topic, r.Key, r.Value, r.Headers = d.str(), d.bytes(), d.bytes(), d.headers(math.MaxUint32)
		return r, d.finish("record")
	}
	var encs [][]byte
	for _, rec := range recs {
		encs = append(encs, AppendRecord(nil, &rec))
	}
	fast := func(b []byte) (Record, error) {
		var r Record
		return r, DecodeRecordInto(b, &r)
	}
	sameBothWays(t, encs, fast, slow, func(got, want Record) bool {
		return got.Offset == want.Offset && got.Timestamp == want.Timestamp && got.Partition == want.Partition && got.Attempt == want.Attempt &&
			got.Topic == want.Topic && sameBytes(got.Key, want.Key) && sameBytes(got.Value, want.Value) && len(got.Headers) == len(want.Headers)
	})
}

// sameBothWays decodes each encoding, cut short at every length and with
// a byte past its end, with fast and with slow, and fails unless both give
// the same error or none and, without one, values same says are the same.
func sameBothWays[T any](t *testing.T, encs [][]byte, fast, slow func([]byte) (T, error), same func(got, want T) bool) {
	t.Helper()
	for _, full := range encs {
		for _, b := range [][]byte{full, append(slices.Clone(full), 0)} {
			for n := 0; n <= len(b); n++ {
				in := b[:n:n]
				want, werr := slow(in)
				got, gerr := fast(in)
				if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
					t.Fatalf("%d of %d bytes: error %v, the decoder's %v", n, len(b), gerr, werr)
				}
				if werr == nil && !same(got, want) {
					t.Fatalf("%d of %d bytes: %+v, the decoder's %+v", n, len(b), got, want)
				}
			}
		}
	}
}

// sameBytes: equal, both null or neither, and x's capacity capped.
func sameBytes(x, y []byte) bool {
	return bytes.Equal(x, y) && (x == nil) == (y == nil) && cap(x) == len(x)
}

// decodeOutputFast (DecodeOutput's path for outputs without headers)
// decodes what the decoder decodes, and leaves to it everything else:
// outputs of every shape, each cut short at every length and with a byte
// past its end, decode the same both ways (same error or none, same
// output: null stays null, capacities capped).
func TestDecodeOutputFastSameAsDecoder(t *testing.T) {
	outs := []Output{
		{Topic: "side", Partition: 3, Key: []byte("k"), Value: []byte("v")},
		{Partition: -1},
		{Topic: "t", Partition: -1, Key: []byte{}, Value: []byte{}},
		{Partition: -2, Value: []byte("v")},
		{Topic: "topic", Partition: 0, Key: []byte("key"), Value: []byte("value"), Headers: []Header{{Key: "h", Value: []byte("x")}}},
	}
	slow := func(b []byte) (Output, error) {
		var o Output
		d := decoder{b: b}
		o.Topic, o.Partition = d.str(), int32(d.u32())
		o.Key, o.Value, o.Headers = d.bytes(), d.bytes(), d.headers(MaxHeaders)
		if d.err == nil && o.Partition < -1 {
			d.fail("partition %d (want -1 or >= 0)", o.Partition)
		}
		return o, d.finish("output")
	}
	var encs [][]byte
	for _, out := range outs {
		encs = append(encs, AppendOutput(nil, &out))
	}
	sameBothWays(t, encs, DecodeOutput, slow, func(got, want Output) bool {
		return got.Topic == want.Topic && got.Partition == want.Partition && sameBytes(got.Key, want.Key) && sameBytes(got.Value, want.Value) &&
			len(got.Headers) == len(want.Headers)
	})
}

// AppendOutputList is a u32 length and AppendOutput's encoding, whatever
// the output (its body is AppendOutput's written out).
func TestAppendOutputListIsAppendOutput(t *testing.T) {
	for _, o := range []Output{
		{},
		{Topic: "side", Partition: 3, Key: []byte("k"), Value: []byte("v")},
		{Key: []byte{}, Value: nil, Partition: -1},
		{Value: []byte("x"), Headers: []Header{{Key: "a", Value: []byte("1")}, {Key: "b"}}},
	} {
		enc := AppendOutput(nil, &o)
		want := append(binary.LittleEndian.AppendUint32([]byte("prefix"), uint32(len(enc))), enc...)
		if got := AppendOutputList([]byte("prefix"), &o); !bytes.Equal(got, want) {
			t.Fatalf("%+v: %x, want %x", o, got, want)
		}
	}
}

// A guest decoding records of one producer one after another allocates
// nothing for their headers: the array and the key strings are reused.
func TestDecodeRecordIntoReusesHeaders(t *testing.T) {
	enc := AppendRecord(nil, &Record{Topic: "in", Key: []byte("k"), Value: []byte("v"),
		Headers: []Header{{Key: "traceparent", Value: []byte("00-x")}, {Key: "source", Value: []byte("orders")}}})
	var r Record
	if err := DecodeRecordInto(enc, &r); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { DecodeRecordInto(enc, &r) }); n != 0 {
		t.Fatalf("%.1f allocations decoding a record like the last one, want 0", n)
	}
	if len(r.Headers) != 2 || r.Headers[0].Key != "traceparent" || string(r.Headers[1].Value) != "orders" {
		t.Fatalf("headers %+v", r.Headers)
	}
	other := AppendRecord(nil, &Record{Topic: "in", Headers: []Header{{Key: "other", Value: nil}}})
	if err := DecodeRecordInto(other, &r); err != nil || len(r.Headers) != 1 || r.Headers[0].Key != "other" || r.Headers[0].Value != nil {
		t.Fatalf("a record with other headers: %+v, %v", r.Headers, err)
	}
}
