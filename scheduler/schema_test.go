package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/wasmstream/wasmstream/internal/failhdr"
	"github.com/wasmstream/wasmstream/internal/schemareg"
	"github.com/wasmstream/wasmstream/internal/schemareg/wire"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// The schemas of the tests: users in, the uppercase processor's view of
// them out (it upper-cases the whole JSON text, field names included).
type schemaCase struct {
	name    string
	typ     sr.SchemaType
	in, out string
	// user is the JSON of user i as the input schema takes it; want the
	// output's JSON as decoded back.
	user, want func(i int) string
}

var schemaCases = []schemaCase{
	{"avro", sr.TypeAvro,
		`{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"id","type":"long"}]}`,
		`{"type":"record","name":"Upper","fields":[{"name":"NAME","type":"string"},{"name":"ID","type":"long"}]}`,
		func(i int) string { return fmt.Sprintf(`{"name":"user-%d","id":%d}`, i, i) },
		func(i int) string { return fmt.Sprintf(`{"NAME":"USER-%d","ID":%d}`, i, i) }},
	{"protobuf", sr.TypeProtobuf,
		"syntax = \"proto3\";\npackage t;\nmessage User { string name = 1; int64 id = 2; }\n",
		"syntax = \"proto3\";\npackage t;\nmessage Upper { string NAME = 1; int64 ID = 2; }\n",
		func(i int) string { return fmt.Sprintf(`{"name":"user-%d","id":"%d"}`, i, i) },
		func(i int) string {
			if i == 0 {
				return `{"NAME":"USER-0"}` // a field at its default is left out (proto3 JSON)
			}
			return fmt.Sprintf(`{"NAME":"USER-%d","ID":"%d"}`, i, i)
		}},
	{"json_schema", sr.TypeJSON,
		`{"type":"object","properties":{"name":{"type":"string"},"id":{"type":"integer"}},"required":["name","id"]}`,
		`{"type":"object","properties":{"NAME":{"type":"string"},"ID":{"type":"integer"}},"required":["NAME","ID"],"additionalProperties":false}`,
		func(i int) string { return fmt.Sprintf(`{"name":"user-%d","id":%d}`, i, i) },
		func(i int) string { return fmt.Sprintf(`{"NAME":"USER-%d","ID":%d}`, i, i) }},
}

// schemaTop is the schema_registry section of a test config.
func schemaTop(reg *srfake.Registry, extra string) string {
	return fmt.Sprintf("schema_registry:\n  url: %s\n  request_timeout: 2s\n%s", reg.URL(), extra)
}

// schemaPipeline is the setup the schema tests share: a fake registry
// (closed when the test ends) holding tc's schemas under the subjects
// given of in-value (tc.in) and out-value (tc.out), an in-process broker
// with the topics in, out and dlq, and a client of the registry of the
// test's own.
type schemaPipeline struct {
	tc      schemaCase
	reg     *srfake.Registry
	brokers []string
	c       *schemareg.Client
	ids     map[string]int // by subject
}

// decodeEncode are the pipeline keys of a pipeline that decodes its input
// values and encodes its outputs'.
const decodeEncode = "    input_format: {value: {format: confluent}}\n    output_format: {value: {format: confluent}}"

func newSchemaPipeline(t *testing.T, tc schemaCase, partitions int, subjects ...string) *schemaPipeline {
	t.Helper()
	p := &schemaPipeline{tc: tc, reg: srfake.New(), ids: map[string]int{}}
	t.Cleanup(p.reg.Close)
	for _, subject := range subjects {
		p.register(t, subject)
	}
	p.brokers = kafkatest.Fake(t)
	kafkatest.CreateTopic(t, p.brokers, int32(partitions), "in", "out", "dlq")
	p.c = schemaClient(t, p.reg)
	return p
}

// register registers the case's schema of subject (in-value or out-value).
func (p *schemaPipeline) register(t *testing.T, subject string) int {
	t.Helper()
	text := map[string]string{"in-value": p.tc.in, "out-value": p.tc.out}[subject]
	id, _, err := p.reg.RegisterSchema(subject, sr.Schema{Schema: text, Type: p.tc.typ})
	if err != nil {
		t.Fatal(err)
	}
	p.ids[subject] = id
	return id
}

// start starts the uppercase processor from in to out on the pipeline's
// broker and registry, with keys (its format and retry keys), stopped
// when the test ends.
func (p *schemaPipeline) start(t *testing.T, keys string) *Runner {
	t.Helper()
	r := startRunner(t, testConfigWith(t, p.brokers, "g", guestPath(t, "uppercase"), "in", "out", "dlq", keys, schemaTop(p.reg, "")))
	t.Cleanup(func() { r.Stop(context.Background()) })
	return r
}

// schemaClient is a client of reg of the test's own, to frame inputs and
// read outputs back as a producer and a consumer with Confluent's
// serializers would.
func schemaClient(t *testing.T, reg *srfake.Registry) *schemareg.Client {
	t.Helper()
	c, err := schemareg.New(schemareg.Config{URL: reg.URL(), RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// produceFramed produces n values framed with subject's latest schema
// (the JSON of value(i)), keyed k<i>.
func produceFramed(t *testing.T, brokers []string, c *schemareg.Client, subject, topic string, n int, value func(i int) string) {
	t.Helper()
	enc, err := c.NewEncoder(context.Background(), schemareg.EncoderConfig{Subject: subject})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	var recs []*kgo.Record
	for i := range n {
		b, err := enc.AppendFramed(nil, []byte(value(i)))
		if err != nil {
			t.Fatalf("framing %s: %v", value(i), err)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i)), Value: b})
	}
	if err := kafkatest.Client(t, brokers).ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// decodeValue is the JSON of a framed output value, and its schema id.
func decodeValue(t *testing.T, c *schemareg.Client, v []byte) (string, int) {
	t.Helper()
	js, d, err := c.AppendJSON(context.Background(), nil, v, wire.Value, nil, 1<<20)
	if err != nil {
		t.Fatalf("output %x does not decode: %v", v, err)
	}
	return string(js), d.SchemaID
}

// sameJSON compares two JSON texts as values.
func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

// TestSchemaDecodeEncodeEachType: records framed with an Avro, a Protobuf
// and a JSON Schema schema reach the guest as JSON (the uppercase
// processor upper-cases it), and its outputs are encoded with the output
// subject's schema, read back framed with that schema's id; every offset
// is committed, and each schema id cost the registry one request.
func TestSchemaDecodeEncodeEachType(t *testing.T) {
	for _, tc := range schemaCases {
		t.Run(tc.name, func(t *testing.T) {
			p := newSchemaPipeline(t, tc, 2, "in-value", "out-value")
			brokers, c, inID, outID := p.brokers, p.c, p.ids["in-value"], p.ids["out-value"]
			var idRequests atomic.Int64
			p.reg.Intercept(func(_ http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path == fmt.Sprintf("/schemas/ids/%d", inID) {
					idRequests.Add(1)
				}
				return false
			})
			const n = 200
			produceFramed(t, brokers, c, "in-value", "in", n, tc.user)
			r := p.start(t, decodeEncode)
			rd := kafkatest.NewReader(t, brokers, "out")
			rd.ReadUntil(t, time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= n })
			seen := map[string]bool{}
			for _, rec := range rd.Recs {
				js, id := decodeValue(t, c, rec.Value)
				if id != outID {
					t.Fatalf("output framed with schema id %d, want the output subject's %d", id, outID)
				}
				var i int
				fmt.Sscanf(string(rec.Key), "k%d", &i)
				if !sameJSON(js, tc.want(i)) {
					t.Fatalf("output of record %d: %s, want %s", i, js, tc.want(i))
				}
				seen[string(rec.Key)] = true
			}
			if len(seen) != n {
				t.Fatalf("%d distinct outputs, want %d", len(seen), n)
			}
			kafkatest.Eventually(t, 10*time.Second, "committed to the end", func() bool {
				c := kafkatest.Committed(t, brokers, "g.p", "in")
				return c[0]+c[1] == n
			})
			// The host fetched the input id once (the test's producer
			// framed by subject).
			if got := idRequests.Load(); got != 1 {
				t.Errorf("%d requests by schema id (input id %d), want 1: the cache by id", got, inID)
			}
			if s := r.SchemaStats(); s.CacheHits.Load()+s.CacheMisses.Load() < n || s.CacheMisses.Load() > 4 {
				t.Errorf("cache hits %d misses %d", s.CacheHits.Load(), s.CacheMisses.Load())
			}
			if s := r.Snapshots()[0]; s.DeadLetter != 0 {
				t.Errorf("%d dead letters", s.DeadLetter)
			}
		})
	}
}

// TestSchemaBadInputDeadLettered: a record whose frame names a schema id
// the registry does not have, one whose payload does not decode with its
// schema, and one with no frame at all fail without a call, terminally
// (no retry though retries are configured): dead-lettered as they came,
// with the failure kind naming the cause and the schema id in
// wasmstream.schema.id when the frame gave one. The records around them
// are processed.
func TestSchemaBadInputDeadLettered(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	tc := schemaCases[0]
	p := newSchemaPipeline(t, tc, 1, "in-value", "out-value")
	brokers, c, inID := p.brokers, p.c, p.ids["in-value"]
	produceFramed(t, brokers, c, "in-value", "in", 2, tc.user)
	bad := []*kgo.Record{
		{Topic: "in", Key: []byte("unknown"), Value: append(wire.AppendHeader(nil, 4242), 2, 'x')},
		{Topic: "in", Key: []byte("garbage"), Value: append(wire.AppendHeader(nil, inID), 0xff, 0xff, 0xff)},
		{Topic: "in", Key: []byte("noframe"), Value: []byte(`{"name":"plain"}`)},
	}
	if err := kafkatest.Client(t, brokers).ProduceSync(context.Background(), bad...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produceFramed(t, brokers, c, "in-value", "in", 2, func(i int) string { return tc.user(i + 2) })
	r := p.start(t, decodeEncode+"\n    retry: {max_attempts: 3, backoff: [100ms]}")
	dl := kafkatest.NewReader(t, brokers, "dlq")
	dl.ReadUntil(t, 30*time.Second, "three dead letters", func(rs []*kgo.Record) bool { return len(rs) >= 3 })
	want := map[string][2]string{
		"unknown": {"schema.schema_not_found", "4242"},
		"garbage": {"schema.decode", fmt.Sprint(inID)},
		"noframe": {"schema.bad_frame", ""},
	}
	for i, rec := range dl.Recs {
		w, ok := want[string(rec.Key)]
		if !ok {
			t.Fatalf("dead letter of %s", rec.Key)
		}
		if got := kafkatest.Header(rec, failhdr.ErrorKind); got != w[0] {
			t.Errorf("%s: kind %q, want %q (%s)", rec.Key, got, w[0], kafkatest.Header(rec, failhdr.Error))
		}
		if got := kafkatest.Header(rec, failhdr.SchemaID); got != w[1] {
			t.Errorf("%s: schema id header %q, want %q", rec.Key, got, w[1])
		}
		if got := kafkatest.Header(rec, failhdr.Attempt); got != "1" {
			t.Errorf("%s: attempt %s, want 1 (not retried)", rec.Key, got)
		}
		if string(rec.Value) != string(bad[i].Value) {
			t.Errorf("%s: dead letter %x, want the record as it came %x", rec.Key, rec.Value, bad[i].Value)
		}
	}
	out := kafkatest.NewReader(t, brokers, "out")
	out.ReadUntil(t, 30*time.Second, "the good records' outputs", func(rs []*kgo.Record) bool { return len(rs) >= 4 })
	kafkatest.Eventually(t, 10*time.Second, "committed to the end", func() bool {
		return kafkatest.Committed(t, brokers, "g.p", "in")[0] == 7
	})
	if s := r.Snapshots(); s[0].Retried != 0 || s[1].Retried != 0 {
		t.Errorf("retried %d, %d: a record that cannot decode is never retried", s[0].Retried, s[1].Retried)
	}
}

// TestSchemaRegistryDownMidRun: the registry stops answering (503) before
// records of an id not yet cached arrive: they fail retryably, to the
// retry tier, not to the dead-letter topic; once it answers again they
// are processed there. None is lost.
func TestSchemaRegistryDownMidRun(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	tc := schemaCases[0]
	p := newSchemaPipeline(t, tc, 1, "out-value")
	brokers, c := p.brokers, p.c
	var down atomic.Bool
	p.reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	// (the output subject is resolved while the registry answers)
	r := p.start(t, decodeEncode+"\n    retry: {max_attempts: 10, backoff: [200ms, 500ms]}")
	// The input schema, registered now and framed by the test's own
	// client: the host has not seen its id.
	p.register(t, "in-value")
	enc, err := c.NewEncoder(context.Background(), schemareg.EncoderConfig{Subject: "in-value"})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	down.Store(true)
	const n = 20
	var recs []*kgo.Record
	for i := range n {
		b, _ := enc.AppendFramed(nil, []byte(tc.user(i)))
		recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(fmt.Sprintf("k%d", i)), Value: b})
	}
	if err := kafkatest.Client(t, brokers).ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	kafkatest.Eventually(t, 30*time.Second, "every record sent to the retry tier", func() bool {
		return r.Snapshots()[0].Retried >= n
	})
	if s := r.Snapshots(); s[0].DeadLetter != 0 || s[1].DeadLetter != 0 {
		t.Fatalf("dead letters while the registry was down: %d, %d", s[0].DeadLetter, s[1].DeadLetter)
	}
	down.Store(false)
	rd := kafkatest.NewReader(t, brokers, "out")
	rd.ReadUntil(t, time.Minute, "every output once the registry is back", func(rs []*kgo.Record) bool { return len(rs) >= n })
	seen := map[string]bool{}
	for _, rec := range rd.Recs {
		js, _ := decodeValue(t, c, rec.Value)
		var i int
		fmt.Sscanf(string(rec.Key), "k%d", &i)
		if !sameJSON(js, tc.want(i)) {
			t.Fatalf("output %s, want %s", js, tc.want(i))
		}
		seen[string(rec.Key)] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct outputs, want %d", len(seen), n)
	}
	kafkatest.Eventually(t, 10*time.Second, "committed to the end", func() bool {
		return kafkatest.Committed(t, brokers, "g.p", "in")[0] == n
	})
	if s := r.Snapshots(); s[0].DeadLetter != 0 || s[1].DeadLetter != 0 {
		t.Fatalf("dead letters: %d, %d", s[0].DeadLetter, s[1].DeadLetter)
	}
}

// TestSchemaOutputNotFittingDeadLettered: raw JSON in, Avro out; an
// output the schema does not take (a string where it wants a long) fails
// its record terminally, dead-lettered with schema.encode, the error
// naming the field and the schema id; the others are encoded. Outputs to
// another allowed topic are left as the guest wrote them.
func TestSchemaOutputNotFittingDeadLettered(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	tc := schemaCases[0]
	p := newSchemaPipeline(t, tc, 1, "out-value")
	brokers, outID := p.brokers, p.ids["out-value"]
	kafkatest.Produce(t, brokers, "in", 3, func(i int) string {
		if i == 1 {
			return `{"name":"bad","id":"not a number"}`
		}
		return tc.user(i)
	})
	p.start(t, "    output_format: {value: {format: confluent}}\n    retry: {max_attempts: 3, backoff: [100ms]}")
	dl := kafkatest.NewReader(t, brokers, "dlq")
	dl.ReadUntil(t, 30*time.Second, "the dead letter", func(rs []*kgo.Record) bool { return len(rs) >= 1 })
	rec := dl.Recs[0]
	if k, e := kafkatest.Header(rec, failhdr.ErrorKind), kafkatest.Header(rec, failhdr.Error); k != "schema.encode" || !strings.Contains(e, "ID") {
		t.Fatalf("dead letter kind %q error %q: want schema.encode naming the field ID", k, e)
	}
	if got := kafkatest.Header(rec, failhdr.SchemaID); got != fmt.Sprint(outID) {
		t.Errorf("schema id header %q, want %d", got, outID)
	}
	if string(rec.Value) != `{"name":"bad","id":"not a number"}` || kafkatest.Header(rec, failhdr.Attempt) != "1" {
		t.Errorf("dead letter %s attempt %s: want the input as it came, attempt 1", rec.Value, kafkatest.Header(rec, failhdr.Attempt))
	}
	out := kafkatest.NewReader(t, brokers, "out")
	out.ReadUntil(t, 30*time.Second, "the two outputs", func(rs []*kgo.Record) bool { return len(rs) >= 2 })
	for _, rec := range out.Recs {
		if _, id := decodeValue(t, p.c, rec.Value); id != outID {
			t.Fatalf("output framed with %d, want %d", id, outID)
		}
	}
	kafkatest.Eventually(t, 10*time.Second, "committed to the end", func() bool {
		return kafkatest.Committed(t, brokers, "g.p", "in")[0] == 3
	})
}

// TestSchemaStartFails: an output subject the registry does not have
// fails the start naming the pipeline and the key; a registry that does
// not answer (nothing listening; a listener that takes the connection and
// never answers), refuses the password (HTTP 401) or wants credentials
// none are given fails it at once, before any pipeline, naming the
// schema_registry key to fix — for a pipeline that only decodes too, which
// asks the registry nothing else at start — within request_timeout, not a
// hang.
func TestSchemaStartFails(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	// A registry behind basic auth as the real ones answer (srfake's own
	// WithAuth answers a wrong password 403): 401 unless u:s3cret.
	locked := srfake.New()
	defer locked.Close()
	locked.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if u, p, ok := r.BasicAuth(); ok && u == "u" && p == "s3cret" {
			return false
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
		http.Error(w, `{"error_code":401,"message":"Unauthorized"}`, http.StatusUnauthorized)
		return true
	})
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 8)
	go func() { // ends when silent is closed; holds the connections, never answers
		for {
			c, err := silent.Accept()
			if err != nil {
				close(held)
				return
			}
			held <- c
		}
	}()
	defer func() {
		silent.Close()
		for c := range held {
			c.Close()
		}
	}()
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("wrong-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	encodes := "    output_format: {value: {format: confluent}}"
	decodes := "    input_format: {value: {format: confluent}}"
	for _, tc := range []struct {
		name, keys, top string
		want            []string
	}{
		{"no such subject", encodes, schemaTop(reg, ""), []string{"pipeline p: output_format.value:", "out-value"}},
		{"registry down", encodes, "schema_registry:\n  url: http://127.0.0.1:1\n  request_timeout: 1s\n",
			[]string{"schema_registry: ", "127.0.0.1:1", "no answer", "connection refused"}},
		{"never answers", decodes, "schema_registry:\n  url: http://" + silent.Addr().String() + "\n  request_timeout: 1s\n",
			[]string{"schema_registry: ", silent.Addr().String(), "no answer within 1s (schema_registry.request_timeout)"}},
		{"wrong password", decodes, fmt.Sprintf("schema_registry:\n  url: %s\n  request_timeout: 2s\n  basic_auth: {username: u, password_file: %s}\n", locked.URL(), pw),
			[]string{"schema_registry: ", "HTTP 401", `user "u" (schema_registry.basic_auth)`, "wrong username or password"}},
		{"no credentials", decodes, schemaTop(locked, ""),
			[]string{"schema_registry: ", "HTTP 401", "set schema_registry.basic_auth or schema_registry.token_file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfigWith(t, brokers, "g", guestPath(t, "uppercase"), "in", "out", "dlq", tc.keys, tc.top)
			start := time.Now()
			r, err := NewRunner(context.Background(), cfg, testLogger(t))
			if err == nil {
				r.Stop(context.Background())
				t.Fatal("started")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
			if strings.Contains(err.Error(), "wrong-pw") {
				t.Errorf("the error shows the password: %v", err)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("took %s to fail", d)
			}
		})
	}
}

// TestSchemaRunsCutAtJSONBound: with input_format.max_json_bytes small
// next to a run of records, runs are cut at the bound (the rest is taken
// again) and every record is processed in order; a record whose decoded
// JSON alone exceeds the bound is dead-lettered (schema.decode), and
// the records after it are processed.
func TestSchemaRunsCutAtJSONBound(t *testing.T) {
	p := newSchemaPipeline(t, schemaCases[0], 1, "in-value", "out-value")
	brokers, c := p.brokers, p.c
	const n = 300
	const big = 150
	name := func(i int) string {
		if i == big {
			return strings.Repeat("x", 2000)
		}
		return fmt.Sprintf("user-%d-%s", i, strings.Repeat("y", 200))
	}
	produceFramed(t, brokers, c, "in-value", "in", n, func(i int) string { return fmt.Sprintf(`{"name":%q,"id":%d}`, name(i), i) })
	r := p.start(t, "    input_format: {value: {format: confluent}, max_json_bytes: 1024}\n    output_format: {value: {format: confluent}}")
	rd := kafkatest.NewReader(t, brokers, "out")
	rd.ReadUntil(t, time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= n-1 })
	for k, rec := range rd.Recs {
		i := k
		if k >= big {
			i = k + 1
		}
		js, _ := decodeValue(t, c, rec.Value)
		if want := fmt.Sprintf(`{"NAME":%q,"ID":%d}`, strings.ToUpper(name(i)), i); !sameJSON(js, want) {
			t.Fatalf("output %d: %.60s..., want record %d's: partition order broken or a record lost", k, js, i)
		}
	}
	dl := kafkatest.NewReader(t, brokers, "dlq")
	dl.ReadUntil(t, 10*time.Second, "the oversized record's dead letter", func(rs []*kgo.Record) bool { return len(rs) >= 1 })
	if k := kafkatest.Header(dl.Recs[0], failhdr.ErrorKind); k != "schema.decode" || string(dl.Recs[0].Key) != fmt.Sprintf("k%d", big) {
		t.Fatalf("dead letter %s kind %q (%s)", dl.Recs[0].Key, k, kafkatest.Header(dl.Recs[0], failhdr.Error))
	}
	kafkatest.Eventually(t, 10*time.Second, "committed to the end", func() bool {
		return kafkatest.Committed(t, brokers, "g.p", "in")[0] == n
	})
	if s := r.Snapshots()[0]; s.Runs == 0 {
		t.Fatalf("no run carried more than one record: the cut was not exercised")
	}
}
