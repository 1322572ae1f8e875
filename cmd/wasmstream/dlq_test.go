package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/internal/failhdr"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// hostile is a guest error message that would retitle the terminal, clear
// it and start a C1 (8-bit) CSI sequence if printed raw.
const hostile = "\x1b]0;pwned\x07\x1b[2J\x9b31m"

// assertPrintable fails if out holds a byte or rune a terminal would act
// on: a control other than newline, DEL, C1, a format character or invalid
// UTF-8.
func assertPrintable(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: invalid UTF-8 printed raw:\n%q", what, out)
	}
	for _, r := range out {
		if r != '\n' && r != '\t' && unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) {
			t.Errorf("%s: control %U printed raw:\n%q", what, r, out)
			return
		}
	}
}

// dlqSetup starts an in-process broker with a pipeline's topics and
// dead-letter records: 0@0 and 0@2 well-formed (0@0 with a hostile error,
// key and header name), 0@1 from a topic that is not an input, 0@3 with no
// wasmstream headers at all, 0@4 with a repeated, malformed attempt header.
func dlqSetup(t *testing.T) (cfg string, brokers []string) {
	brokers = kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq", "g.p.retry.1s")
	dir := t.TempDir()
	mod := writeFile(t, dir, "m.wasm", wt.Minimal(wt.I32Const(0)).Bytes())
	cfg = writeFile(t, dir, "c.yaml", []byte(`
kafka: {brokers: [`+brokers[0]+`], group: g}
pipelines:
  - {name: p, module: `+mod+`, inputs: [in], output: out, dead_letter_topic: dlq, retry: {max_attempts: 2, backoff: [1s]}}
`))
	dead := func(topic string, offset int64, msg string) []kgo.RecordHeader {
		st := failhdr.State{
			Pipeline: "p", Kind: "guest.fail", Error: msg,
			Origin:  failhdr.Origin{Topic: topic, Partition: 0, Offset: offset, Timestamp: 1},
			Attempt: 2, ModuleDigest: "sha256:00", FailedAt: time.Now(), FirstFailure: time.Now().Add(-time.Second),
			History: []failhdr.Entry{{Attempt: 1, Text: "guest.retry: first " + msg}, {Attempt: 2, Text: "guest.fail: " + msg + "\nsecond line"}},
		}
		return failhdr.Encode([]kgo.RecordHeader{{Key: "own" + msg, Value: []byte("kept")}}, &st)
	}
	recs := []*kgo.Record{
		{Key: []byte("k" + hostile), Value: []byte("v0"), Headers: dead("in", 10, hostile)},
		{Key: []byte("k1"), Value: []byte("v1"), Headers: dead("elsewhere", 11, "wrong topic")},
		{Key: []byte("k2"), Value: []byte("v2"), Headers: dead("in", 12, "plain")},
		{Key: []byte("k3"), Value: []byte("v3")},
		{Key: []byte("k4"), Value: []byte("v4"), Headers: append(dead("in", 14, "bad attempt"), kgo.RecordHeader{Key: failhdr.Attempt, Value: []byte("x")})},
	}
	for _, r := range recs {
		r.Topic = "dlq"
	}
	if err := kafkatest.Client(t, brokers).ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return cfg, brokers
}

// TestDLQEscapesGuestText: list and show print a hostile error message, key
// and header name escaped.
func TestDLQEscapesGuestText(t *testing.T) {
	cfg, _ := dlqSetup(t)
	code, out, errs := runCLI(t, "dlq", "list", "--config", cfg)
	if code != 0 || !strings.Contains(out, "5 of 5 dead-lettered records") || !strings.Contains(out, `\x1b]0;pwned\x07\x1b[2J\x9b31m`) {
		t.Fatalf("list: code %d\n%s\n%s", code, out, errs)
	}
	assertPrintable(t, "dlq list", out)
	code, out, errs = runCLI(t, "dlq", "show", "--config", cfg, "0@0")
	if code != 0 || !strings.Contains(out, `attempt 2: guest.fail: \x1b]0;pwned`) || !strings.Contains(out, "\n      second line") {
		t.Fatalf("show: code %d\n%s\n%s", code, out, errs)
	}
	assertPrintable(t, "dlq show", out)
	code, out, _ = runCLI(t, "dlq", "show", "--config", cfg, "0@3")
	if code != 0 || !strings.Contains(out, "malformed: wasmstream.pipeline: missing") {
		t.Fatalf("show of a record without headers: code %d\n%s", code, out)
	}
}

// TestDLQRedriveSkipsBadRecords: a dead letter that cannot be redriven is
// reported and skipped; every other one is sent; the command exits 1 with a
// summary naming the bad ones.
func TestDLQRedriveSkipsBadRecords(t *testing.T) {
	cfg, brokers := dlqSetup(t)
	code, out, errs := runCLI(t, "dlq", "redrive", "--config", cfg)
	for _, want := range []string{"redriven 0@0 -> in", "not redriven 0@1: its original topic \"elsewhere\" is not an input", "redriven 0@2 -> in",
		"not redriven 0@3: it has no usable wasmstream.original.topic", "redriven 0@4 -> in", "3 records redriven, 2 could not be"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if code != 1 || !strings.Contains(errs, "2 of 5 matching records could not be redriven: 0@1: ") || !strings.Contains(errs, "; 0@3: ") {
		t.Errorf("code %d, stderr %q", code, errs)
	}
	assertPrintable(t, "dlq redrive", out+errs)
	if t.Failed() {
		t.Fatalf("stdout:\n%s", out)
	}
	in := kafkatest.NewReader(t, brokers, "in")
	in.ReadUntil(t, 30*time.Second, "three redriven records", func(rs []*kgo.Record) bool { return len(rs) >= 3 })
	for i, r := range in.Recs {
		// A fresh start: the record's own headers and the mark, nothing else.
		var ours []string
		for _, h := range r.Headers {
			if strings.HasPrefix(h.Key, failhdr.Prefix) {
				ours = append(ours, h.Key)
			}
		}
		if len(ours) != 1 || kafkatest.Header(r, failhdr.RedrivenFrom) != []string{"dlq[0]@0", "dlq[0]@2", "dlq[0]@4"}[i] || len(r.Headers) != 2 {
			t.Errorf("redriven record %d: headers %v", i, r.Headers)
		}
	}

	// Redriven records are recorded: list marks them, --pending hides
	// them, a second redrive refuses them.
	code, out, _ = runCLI(t, "dlq", "list", "--config", cfg, "--pending")
	if code != 0 || !strings.Contains(out, "2 of 5 dead-lettered records in dlq match and are not redriven") || strings.Contains(out, "0@0 ") || !strings.Contains(out, "0@1 ") {
		t.Fatalf("list --pending: code %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "dlq", "list", "--config", cfg)
	if code != 0 || !strings.Contains(out, "[redriven ") || !strings.Contains(out, `value="v2"`) {
		t.Fatalf("list: code %d\n%s", code, out)
	}
	code, out, errs = runCLI(t, "dlq", "redrive", "--config", cfg, "--to", "retry")
	if code != 1 || !strings.Contains(out, "refused 0@0: redriven already") || !strings.Contains(out, "0 records redriven, 2 could not be, 3 refused") ||
		!strings.Contains(errs, "3 of 5 matching records refused as redriven already (--force sends them again)") {
		t.Fatalf("second redrive: code %d\n%s\n%s", code, out, errs)
	}

	// To the retry tier (--force: they were redriven already): the
	// well-formed ones keep their origin and history and are on the next
	// attempt; the malformed are reported.
	code, out, errs = runCLI(t, "dlq", "redrive", "--config", cfg, "--to", "retry", "--force")
	if code != 1 || !strings.Contains(out, "redriven 0@0 -> g.p.retry.1s") || !strings.Contains(out, "not redriven 0@1: its original topic") ||
		!strings.Contains(out, "redriven 0@2 -> g.p.retry.1s") || !strings.Contains(out, "not redriven 0@3: it has no usable") ||
		!strings.Contains(out, `not redriven 0@4: its headers do not say where it was first consumed and how it failed: wasmstream.attempt: repeated`) || !strings.Contains(errs, "3 of 5 matching records") {
		t.Fatalf("redrive --to retry: code %d\n%s\n%s", code, out, errs)
	}
	rt := kafkatest.NewReader(t, brokers, "g.p.retry.1s")
	rt.ReadUntil(t, 30*time.Second, "two records on the retry tier", func(rs []*kgo.Record) bool { return len(rs) >= 2 })
	st, err := failhdr.Decode(rt.Recs[1].Headers)
	if err != nil || st.Origin.Topic != "in" || st.Origin.Offset != 12 || st.Attempt != 3 || len(st.History) != 2 || st.RedrivenFrom != "dlq[0]@2" || st.Due.IsZero() {
		t.Fatalf("retry copy: %+v, %v", st, err)
	}
}

// The value preview is bounded, cut at a character and escaped.
func TestDLQPreview(t *testing.T) {
	long := strings.Repeat("é", 40) // 80 bytes
	for _, tc := range []struct {
		v    []byte
		want string
	}{
		{nil, "null"},
		{[]byte("v1"), `"v1"`},
		{[]byte("\x1b]0;pwned\x07\u202e"), `"\x1b]0;pwned\a\u202e"`},
		{[]byte(long), `"` + strings.Repeat("é", 30) + `"…(+20 bytes)`},
	} {
		if got := preview(tc.v); got != tc.want {
			t.Errorf("preview(%q) = %s, want %s", tc.v, got, tc.want)
		}
	}
}

// deadLetter is a dead letter of pipeline p in the pipeline's dead-letter
// topic dlq: first consumed at in[partition]@offset, failed on attempt 2.
func deadLetter(dlq string, key []byte, partition int32, offset int64) *kgo.Record {
	st := failhdr.State{
		Pipeline: "p", Kind: "guest.fail", Error: "asked to fail",
		Origin:  failhdr.Origin{Topic: "in", Partition: partition, Offset: offset, Timestamp: 1},
		Attempt: 2, ModuleDigest: "sha256:00", FailedAt: time.Now(), FirstFailure: time.Now().Add(-time.Second),
		History: []failhdr.Entry{{Attempt: 1, Text: "guest.retry: first"}, {Attempt: 2, Text: "guest.fail: asked to fail"}},
	}
	return &kgo.Record{Topic: dlq, Key: key, Value: []byte(fmt.Sprintf("v%d@%d", partition, offset)), Headers: failhdr.Encode(nil, &st)}
}

// redriveSetup starts an in-process broker with pipeline p (input in of
// inParts partitions, dead-letter topic dlq) and the given dead letters in
// dlq.
func redriveSetup(t *testing.T, inParts int32, dead ...*kgo.Record) (cfg string, brokers []string) {
	brokers = kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, inParts, "in")
	kafkatest.CreateTopic(t, brokers, 1, "out", "dlq")
	dir := t.TempDir()
	mod := writeFile(t, dir, "m.wasm", wt.Minimal(wt.I32Const(0)).Bytes())
	cfg = writeFile(t, dir, "c.yaml", []byte(`
kafka: {brokers: [`+brokers[0]+`], group: g}
pipelines:
  - {name: p, module: `+mod+`, inputs: [in], output: out, dead_letter_topic: dlq}
`))
	produceDead(t, brokers, dead...)
	return cfg, brokers
}

func produceDead(t *testing.T, brokers []string, dead ...*kgo.Record) {
	t.Helper()
	if len(dead) == 0 {
		return
	}
	if err := kafkatest.Client(t, brokers).ProduceSync(context.Background(), dead...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestDLQRedriveToOriginalPartition: a dead letter redriven to the input
// goes back to the partition it was first consumed from, keyless or not;
// one whose partition the input no longer has is reported (exit 1), and
// --partition key places it by its key instead.
func TestDLQRedriveToOriginalPartition(t *testing.T) {
	var dead []*kgo.Record
	for i := range 8 {
		var key []byte // keyless: placed by the sticky partitioner, were it not pinned
		if i == 7 {
			key = []byte("k")
		}
		dead = append(dead, deadLetter("dlq", key, int32(i%4), int64(100+i)))
	}
	dead = append(dead, deadLetter("dlq", nil, 9, 200)) // the input has 4 partitions
	cfg, brokers := redriveSetup(t, 4, dead...)
	code, out, errs := runCLI(t, "dlq", "redrive", "--config", cfg)
	if code != 1 || !strings.Contains(out, "redriven 0@1 -> in[1]") || !strings.Contains(out, "8 records redriven, 1 could not be") ||
		!strings.Contains(out, "not redriven 0@8: its original partition 9 is not in in (4 partitions; --partition key sends it by its key)") {
		t.Fatalf("redrive: code %d\n%s\n%s", code, out, errs)
	}
	in := kafkatest.NewReader(t, brokers, "in")
	in.ReadUntil(t, 30*time.Second, "eight copies", func(rs []*kgo.Record) bool { return len(rs) >= 8 })
	for _, r := range in.Recs {
		if want := fmt.Sprintf("v%d@", r.Partition); !strings.HasPrefix(string(r.Value), want) {
			t.Errorf("copy %q of a record first consumed from partition %s is on partition %d", r.Value, string(r.Value)[1:2], r.Partition)
		}
	}
	code, out, errs = runCLI(t, "dlq", "redrive", "--config", cfg, "--partition", "key", "--kind", "guest.fail")
	if code != 1 || !strings.Contains(out, "redriven 0@8 -> in[") || !strings.Contains(errs, "8 of 9 matching records refused as redriven already") {
		t.Fatalf("redrive --partition key: code %d\n%s\n%s", code, out, errs)
	}
	if code, _, errs = runCLI(t, "dlq", "redrive", "--config", cfg, "--to", "retry", "--partition", "original"); code != 1 || !strings.Contains(errs, "--partition original: only with --to input") {
		t.Fatalf("--to retry --partition original: code %d, %s", code, errs)
	}
}

// TestDLQMarkersOfRecreatedTopic: after the dead-letter topic is deleted
// and created again, its new dead letters (at the places of the old ones,
// redriven) are pending and redrive sends them; the old markers are
// reported as of another topic. A redrive that refuses records exits 1.
func TestDLQMarkersOfRecreatedTopic(t *testing.T) {
	cfg, brokers := redriveSetup(t, 1, deadLetter("dlq", []byte("a"), 0, 10), deadLetter("dlq", []byte("b"), 0, 11))
	if code, out, errs := runCLI(t, "dlq", "redrive", "--config", cfg); code != 0 || !strings.Contains(out, "2 records redriven, 0 could not be, 0 refused") {
		t.Fatalf("redrive: code %d\n%s\n%s", code, out, errs)
	}
	code, out, errs := runCLI(t, "dlq", "redrive", "--config", cfg)
	if code != 1 || !strings.Contains(out, "refused 0@0: redriven already") || !strings.Contains(errs, "2 of 2 matching records refused as redriven already (--force sends them again)") {
		t.Fatalf("second redrive: code %d\n%s\n%s", code, out, errs)
	}

	adm := kadm.NewClient(kafkatest.Client(t, brokers))
	if _, err := adm.DeleteTopic(context.Background(), "dlq"); err != nil {
		t.Fatal(err)
	}
	kafkatest.CreateTopic(t, brokers, 1, "dlq")
	produceDead(t, brokers, deadLetter("dlq", []byte("a"), 0, 10), deadLetter("dlq", []byte("b"), 0, 11))
	code, out, errs = runCLI(t, "dlq", "list", "--config", cfg, "--pending")
	if code != 0 || !strings.Contains(out, "2 of 2 dead-lettered records in dlq match and are not redriven") ||
		!strings.Contains(errs, "dlq.redriven: 2 markers of another topic ID ignored") {
		t.Fatalf("list --pending after the topic was created again: code %d\n%s\n%s", code, out, errs)
	}
	if code, out, errs = runCLI(t, "dlq", "redrive", "--config", cfg); code != 0 || !strings.Contains(out, "2 records redriven, 0 could not be, 0 refused") {
		t.Fatalf("redrive after the topic was created again: code %d\n%s\n%s", code, out, errs)
	}
	in := kafkatest.NewReader(t, brokers, "in")
	in.ReadUntil(t, 30*time.Second, "four copies", func(rs []*kgo.Record) bool { return len(rs) >= 4 })
}

// TestDLQForgedMarkerHidesNothing: markers written to .redriven that do not
// name the dead letter at their place in full — old-format, of the topic's
// ID but another record, written ahead of a dead letter — hide nothing:
// list --pending shows the records with why each marker was ignored, and
// redrive sends them.
func TestDLQForgedMarkerHidesNothing(t *testing.T) {
	cfg, brokers := redriveSetup(t, 1, deadLetter("dlq", []byte("a"), 0, 10), deadLetter("dlq", []byte("b"), 0, 11))
	cl := kafkatest.Client(t, brokers)
	ts, err := kadm.NewClient(cl).ListTopics(context.Background(), "dlq")
	if err != nil {
		t.Fatal(err)
	}
	tid := ts["dlq"].ID
	id := base64.RawURLEncoding.EncodeToString(tid[:])
	// Forged as a writer of .redriven would: bytes, not the command's types.
	marker := func(key string, of map[string]any) *kgo.Record {
		m := map[string]any{"to": "in" + hostile, "copy": "0@0", "at": time.Now().Add(time.Hour)}
		if of != nil {
			m["of"] = of
		}
		v, _ := json.Marshal(m)
		return &kgo.Record{Topic: "dlq.redriven", Key: []byte(key), Value: v}
	}
	guess := func(offset, origin int64) map[string]any {
		return map[string]any{"topic_id": id, "partition": 0, "offset": offset, "origin_topic": "in", "origin_partition": 0, "origin_offset": origin, "attempt": 2, "digest": "sha256:00"}
	}
	kafkatest.CreateTopic(t, brokers, 1, "dlq.redriven")
	produceDead(t, brokers,
		marker("0@0", nil),                    // old format
		marker(id+":0@1", guess(1, 11)),       // this topic and place, every coordinate right but the record
		marker(id+":0@2", guess(2, 12)),       // ahead of the dead letter it guesses
		marker(id+":0@3", guess(2, 12)),       // naming another place than its key
		deadLetter("dlq", []byte("c"), 0, 12), // the dead letter 0@2 guessed
		deadLetter("dlq", []byte("d"), 0, 12), // 0@3
	)
	code, out, errs := runCLI(t, "dlq", "list", "--config", cfg, "--pending")
	for _, want := range []string{
		"4 of 4 dead-lettered records in dlq match and are not redriven",
		"[marker ignored: an old-format marker keyed 0@0 alone says redriven",
		"[marker ignored: it names another record at this place (its digest differs)]",
		"[marker ignored: it names the dead letter at 0@2]",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("list --pending lacks %q", want)
		}
	}
	if code != 0 || !strings.Contains(errs, "dlq.redriven: 1 old-format markers (keyed partition@offset alone) ignored") ||
		!strings.Contains(errs, "dlq.redriven: 3 markers that do not match the dead letter they name ignored") {
		t.Errorf("code %d, stderr:\n%s", code, errs)
	}
	assertPrintable(t, "dlq list", out+errs)
	if t.Failed() {
		t.Fatalf("stdout:\n%s", out)
	}
	if code, out, errs = runCLI(t, "dlq", "redrive", "--config", cfg); code != 0 || !strings.Contains(out, "4 records redriven, 0 could not be, 0 refused") ||
		!strings.Contains(out, "redriven 0@0 -> in[0]  [marker ignored: an old-format marker keyed 0@0 alone") {
		t.Fatalf("redrive: code %d\n%s\n%s", code, out, errs)
	}
	// Its own markers replace the forged ones: a second redrive refuses all.
	if code, out, errs = runCLI(t, "dlq", "list", "--config", cfg, "--pending"); code != 0 || !strings.Contains(out, "0 of 4 dead-lettered records in dlq match and are not redriven") || !strings.Contains(errs, "1 old-format markers") {
		t.Fatalf("list --pending after the redrive: code %d\n%s\n%s", code, out, errs)
	}
}

// TestDLQByVersion: list and redrive select dead letters by the module
// version they failed on — its label, its digest or a prefix of 6 or more
// of its hex digits — so a failed canary's records are redriven apart from
// the stable version's rejections; list prints each one's version, and a
// record without a key as key=null (not "", an empty key).
func TestDLQByVersion(t *testing.T) {
	t.Parallel()
	const stable, canary = "sha256:0a0a0a0a0a0a0a0a", "sha256:cafecafecafecafe"
	on := func(r *kgo.Record, digest, label string) *kgo.Record {
		st, err := failhdr.Decode(r.Headers)
		if err != nil {
			t.Fatal(err)
		}
		st.ModuleDigest, st.ModuleLabel = digest, label
		r.Headers = failhdr.Encode(nil, &st)
		return r
	}
	cfg, brokers := redriveSetup(t, 1,
		on(deadLetter("dlq", []byte("a"), 0, 10), stable, ""),
		on(deadLetter("dlq", nil, 0, 11), canary, "v3-canary"),
		on(deadLetter("dlq", []byte(""), 0, 12), canary, "v3-canary"),
		on(deadLetter("dlq", []byte("b"), 0, 13), stable, "v2"))
	code, out, errs := runCLI(t, "dlq", "list", "--config", cfg)
	for _, want := range []string{"version=0a0a0a0a0a0a  key=\"a\"", "version=cafecafecafe (v3-canary)  key=null", "version=cafecafecafe (v3-canary)  key=\"\"", "version=0a0a0a0a0a0a (v2)  key=\"b\""} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("list: code %d, lacks %q\n%s\n%s", code, want, out, errs)
		}
	}
	if _, out, _ = runCLI(t, "dlq", "show", "--config", cfg, "0@1"); !strings.Contains(out, "key:   null\n") {
		t.Errorf("show of a record without a key:\n%s", out)
	}
	for _, v := range []string{"v3-canary", canary, "cafeca", "sha256:cafecafe"} {
		code, out, errs := runCLI(t, "dlq", "list", "--config", cfg, "--version", v)
		if code != 0 || !strings.Contains(out, "2 of 4 dead-lettered records in dlq match") || !strings.Contains(out, "0@1 ") || !strings.Contains(out, "0@2 ") {
			t.Errorf("list --version %s: code %d\n%s\n%s", v, code, out, errs)
		}
	}
	// Too short a prefix to be taken as a digest; a label is compared whole.
	for _, v := range []string{"cafe", "v3", "v2-"} {
		if code, out, errs := runCLI(t, "dlq", "list", "--config", cfg, "--version", v); code != 0 || !strings.Contains(out, "0 of 4 dead-lettered records in dlq match") {
			t.Errorf("list --version %s: code %d\n%s\n%s", v, code, out, errs)
		}
	}
	code, out, errs = runCLI(t, "dlq", "redrive", "--config", cfg, "--version", "v3-canary")
	if code != 0 || !strings.Contains(out, "2 records redriven, 0 could not be, 0 refused") || strings.Contains(out, "0@0") || strings.Contains(out, "0@3") {
		t.Fatalf("redrive --version v3-canary: code %d\n%s\n%s", code, out, errs)
	}
	in := kafkatest.NewReader(t, brokers, "in")
	in.ReadUntil(t, 30*time.Second, "the canary's two records", func(rs []*kgo.Record) bool { return len(rs) >= 2 })
	for _, r := range in.Recs {
		if v := string(r.Value); v != "v0@11" && v != "v0@12" {
			t.Errorf("redriven %q, want only the canary's records (v0@11, v0@12)", v)
		}
	}
	if code, out, errs = runCLI(t, "dlq", "list", "--config", cfg, "--pending"); code != 0 || !strings.Contains(out, "2 of 4 dead-lettered records in dlq match and are not redriven") {
		t.Errorf("list --pending after: code %d\n%s\n%s", code, out, errs)
	}
}
