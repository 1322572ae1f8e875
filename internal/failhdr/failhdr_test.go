package failhdr

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func sample() State {
	return State{
		Pipeline: "p", Kind: "guest.retry", Error: "asked to retry",
		Origin:  Origin{Topic: "in", Partition: 3, Offset: 42, Timestamp: 1700000000123},
		Attempt: 3, ModuleDigest: "sha256:ab",
		FailedAt:     time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC),
		FirstFailure: time.Date(2025, 1, 2, 3, 4, 0, 0, time.UTC),
		Due:          time.UnixMilli(1700000009999),
		History:      []Entry{{1, "guest.retry: a"}, {2, "fault.trap: b"}},
		RedrivenFrom: "dlq[0]@7",
	}
}

func TestRoundTrip(t *testing.T) {
	st := sample()
	own := []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-x")}}
	hs := Encode(append([]kgo.RecordHeader(nil), own...), &st)
	got, err := Decode(hs)
	if err != nil {
		t.Fatal(err)
	}
	if !equal(got, st) {
		t.Fatalf("decoded %+v\nwant    %+v", got, st)
	}
	if o := Own(hs); !reflect.DeepEqual(o, own) {
		t.Fatalf("own headers %v", o)
	}
	if !DueAt(hs).Equal(st.Due) {
		t.Fatalf("DueAt %v", DueAt(hs))
	}
}

func TestDecodeReportsEachBadHeader(t *testing.T) {
	st := sample()
	hs := Encode(nil, &st)
	set := func(k, v string) {
		for i := range hs {
			if hs[i].Key == k {
				hs[i].Value = []byte(v)
			}
		}
	}
	set(Attempt, "-1")
	set(OriginalOffset, "x")
	hs = append(hs, kgo.RecordHeader{Key: HistoryPrefix + "1", Value: []byte("again")},
		kgo.RecordHeader{Key: HistoryPrefix + "01", Value: nil},
		kgo.RecordHeader{Key: Pipeline, Value: []byte("q")})
	hs = hs[1:] // drop history.1's first copy: the appended one stays
	got, err := Decode(hs)
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("err %v", err)
	}
	want := []string{Attempt, OriginalOffset, HistoryPrefix + "01", Pipeline}
	if len(es) != len(want) {
		t.Fatalf("errors %v, want one for each of %v", err, want)
	}
	for _, k := range want {
		if !Unusable(err, k) {
			t.Errorf("no error for %s in %v", k, err)
		}
	}
	if got.Attempt != 0 || got.Origin.Offset != 0 || got.Origin.Topic != "in" || got.Pipeline != "p" {
		t.Fatalf("fields: %+v", got)
	}
	if len(got.History) != 2 || got.History[0].Text != "again" {
		t.Fatalf("history %v", got.History)
	}
	if _, err := Decode(nil); err == nil || !strings.Contains(err.Error(), OriginalTopic+": missing") {
		t.Fatalf("no headers: %v", err)
	}
}

func TestNewEntryCutsOnARune(t *testing.T) {
	e := NewEntry(1, "k", strings.Repeat("é", 2000))
	if len(e.Text) > MaxHistoryEntry || !strings.HasPrefix(e.Text, "k: é") || strings.ToValidUTF8(e.Text, "?") != e.Text {
		t.Fatalf("entry of %d bytes: %q…", len(e.Text), e.Text[:10])
	}
}

func equal(a, b State) bool {
	ta := []time.Time{a.FailedAt, a.FirstFailure, a.Due}
	tb := []time.Time{b.FailedAt, b.FirstFailure, b.Due}
	for i := range ta {
		if !ta[i].Equal(tb[i]) {
			return false
		}
	}
	a.FailedAt, a.FirstFailure, a.Due = time.Time{}, time.Time{}, time.Time{}
	b.FailedAt, b.FirstFailure, b.Due = time.Time{}, time.Time{}, time.Time{}
	if len(a.History) == 0 && len(b.History) == 0 {
		a.History, b.History = nil, nil
	}
	return reflect.DeepEqual(a, b)
}

// headersFrom turns fuzz bytes into a header set: headers separated by \n,
// key and value by the first =; a key starting with * gets the namespace.
func headersFrom(b string) []kgo.RecordHeader {
	var hs []kgo.RecordHeader
	for _, line := range strings.Split(b, "\n") {
		k, v, _ := strings.Cut(line, "=")
		if strings.HasPrefix(k, "*") {
			k = Prefix + k[1:]
		}
		hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return hs
}

// FuzzDecode: any header set decodes without panicking; a state decoded
// without error encodes back to headers that decode to the same state, and
// every state Decode returns encodes to headers it accepts.
func FuzzDecode(f *testing.F) {
	st := sample()
	var b strings.Builder
	for _, h := range Encode([]kgo.RecordHeader{{Key: "own", Value: []byte("v")}}, &st) {
		b.WriteString(h.Key + "=" + string(h.Value) + "\n")
	}
	f.Add(b.String())
	f.Add("*attempt=99999999999\n*history.0=x\n*history.2=y\n*history.2=z")
	f.Add("*original.partition=-1\n*original.offset=9223372036854775808\n*due=1e3\n*failed.at=2025-13-01T00:00:00Z")
	f.Add("*original.topic=\n*first.failure=2025-01-01T00:00:00+01:00\n*due=-62135596800000")
	f.Fuzz(func(t *testing.T, s string) {
		hs := headersFrom(s)
		st, err := Decode(hs)
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %v is not a non-empty Errors", err)
			}
		}
		if st.Attempt < 0 || st.Attempt > MaxAttempt || st.Origin.Partition < 0 || st.Origin.Offset < 0 {
			t.Fatalf("out of range: %+v", st)
		}
		for i := 1; i < len(st.History); i++ {
			if st.History[i].Attempt <= st.History[i-1].Attempt {
				t.Fatalf("history not ascending: %v", st.History)
			}
		}
		own := Own(hs)
		for _, h := range own {
			if strings.HasPrefix(h.Key, Prefix) {
				t.Fatalf("Own kept %q", h.Key)
			}
		}
		if st.Attempt == 0 || st.Origin.Topic == "" {
			return // Encode's input must be a usable state
		}
		if st.FailedAt.Year() > 9999 || st.FirstFailure.Year() > 9999 || st.FailedAt.Year() < 0 || st.FirstFailure.Year() < 0 {
			return
		}
		again, err2 := Decode(Encode(own, &st))
		if err2 != nil {
			t.Fatalf("re-encoding %+v: %v", st, err2)
		}
		if err == nil && !equal(again, st) {
			t.Fatalf("round trip:\n%+v\n%+v", st, again)
		}
	})
}
