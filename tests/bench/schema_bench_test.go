//go:build integration

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/internal/schemareg"
	"github.com/wasmstream/wasmstream/internal/schemareg/wire"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// orderProto is the Protobuf twin of the avro-serde example's Order
// (plugins/examples/avro-serde/schemas/order.avsc): the same seven fields
// under the same names, the union an optional string, the timestamp a
// google.protobuf.Timestamp.
const orderProto = `syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  string customer = 2;
  double amount = 3;
  google.protobuf.Timestamp placed_at = 4;
  repeated string items = 5;
  optional string coupon = 6;
  int32 priority = 7;
}
`

// schemaRow is a row of BenchmarkSchemaPipeline: its input topic, the
// pipeline keys of its formats and, for a confluent row, the schema id its
// outputs are written with.
type schemaRow struct {
	name  string
	typ   sr.SchemaType
	text  string
	in    string
	keys  []string
	outID int
}

// BenchmarkSchemaPipeline: what the schema-registry pipeline costs the host
// over the raw one (issue 56 §4: decode + encode at most 2.5 µs of CPU per
// record). The same Go processor (tests/bench/testdata/customerupper: it
// upper-cases the "customer" field of the JSON it reads and emits the rest)
// over the same number of records on the same partitions, one row after the
// other on the real broker:
//
//   - raw: the JSON the Avro row's guest reads, as raw records in and out
//     (the baseline);
//   - avro: the avro-serde example's 7-field Order (a union, an array, a
//     timestamp-millis) framed by the registry, input_format and
//     output_format confluent;
//   - protobuf: the same order as a Protobuf message (orderProto).
//
// Beside the franz-go passthrough reference (x_ref; each round runs it
// first, see schemaRounds) each row reports
// rec/s, cpu_us/rec, allocs/rec and B/rec of the whole process (host,
// client, the benchmark's sampling); the confluent rows also report what
// they add over the raw row of the same run (added_cpu_us/rec,
// added_allocs/rec, added_B/rec) and the registry requests the host made
// (registry_requests: one per schema id and subject, never per record).
// Every row's outputs are read back and checked: n of them, each decoding
// with the output subject's schema id, each order's customer upper-cased
// and its id kept; a missing or wrong one fails the benchmark.
//
// The registry is franz-go's srfake, in process: an httptest server serving
// the Confluent API (the scheduler's schema tests use it too). It answers
// only the host's start and its first lookup of each id, outside the
// per-record path, so the figures are the host's; the real registry
// (Apicurio) is exercised by tests/integration's schema tests.
//
//	BENCH_RECORDS=200000 BENCH_ROUNDS=3 go test -tags integration -run '^$' -bench BenchmarkSchemaPipeline -benchtime 1x ./tests/bench/
//	BENCH_RECORDS=5000 go test -tags integration -run '^$' -bench BenchmarkSchemaPipeline -benchtime 1x ./tests/bench/   # smoke
func BenchmarkSchemaPipeline(b *testing.B) {
	brokers := kafkatest.RealBrokers(b)
	n := records()
	reg := srfake.New()
	b.Cleanup(reg.Close)
	var requests atomic.Int64
	reg.Intercept(func(http.ResponseWriter, *http.Request) bool { requests.Add(1); return false })
	client, err := schemareg.New(schemareg.Config{URL: reg.URL(), RequestTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	avsc, err := os.ReadFile(filepath.Join(wt.RepoRoot(b), "plugins/examples/avro-serde/schemas/order.avsc"))
	if err != nil {
		b.Fatal(err)
	}
	module := filepath.Join(b.TempDir(), "customerupper.wasm")
	os.WriteFile(module, wt.BuildGoGuest(b, "tests/bench/testdata/customerupper"), 0o644)

	rows := []*schemaRow{{name: "raw"}, {name: "avro", typ: sr.TypeAvro, text: string(avsc)}, {name: "protobuf", typ: sr.TypeProtobuf, text: orderProto}}
	for _, row := range rows[1:] {
		schemaInput(b, brokers, reg, client, row, n)
	}
	rawInput(b, brokers, client, rows[0], rows[1].in, n)
	for _, row := range rows {
		kafkatest.CreateTopic(b, brokers, partitions, row.in+"-out", row.in+"-dlq")
	}
	kafkatest.CreateTopic(b, brokers, partitions, rows[0].in+"-ref")

	defer func(sets []string) { hostSets = sets }(hostSets)
	hostSets = append(hostSets[:len(hostSets):len(hostSets)], "schema_registry.url="+reg.URL())
	for range schemaRounds() {
		var ref float64
		runReferenceTo(b, brokers, rows[0].in, n, &ref)
		var raw drained
		for _, row := range rows {
			b.Run(row.name, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					d := schemaDrain(b, brokers, client, module, row, n, &requests)
					rate := float64(n) / d.el.Seconds()
					b.ReportMetric(rate, "rec/s")
					b.ReportMetric(rate/ref, "x_ref")
					if row.text == "" {
						raw = d
					} else if raw.el > 0 {
						b.ReportMetric(d.cpuUs-raw.cpuUs, "added_cpu_us/rec")
						b.ReportMetric(d.allocs-raw.allocs, "added_allocs/rec")
						b.ReportMetric(d.by-raw.by, "added_B/rec")
					}
				}
			})
		}
	}
}

// schemaRounds is BENCH_ROUNDS (default 1): how many times
// BenchmarkSchemaPipeline runs its rows, interleaved (reference, raw,
// avro, protobuf, reference, raw, ...; Go names the repeats raw#01, ...),
// each confluent row's added figures against its own round's raw row, so
// that a load that drifts over the run weighs on both sides of a
// difference. (-count repeats each row in place instead: raw, raw, raw,
// avro, ...)
func schemaRounds() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 1
}

// schemaDrain runs row's pipeline over its input until n records are done
// (drainHostMeasured), reports the registry requests it made, and checks
// the outputs it wrote.
func schemaDrain(b *testing.B, brokers []string, client *schemareg.Client, module string, row *schemaRow, n int, requests *atomic.Int64) drained {
	b.Logf("load average at start: %s", loadAverage())
	ends := endOffsets(b, brokers, row.in+"-out")
	requests.Store(0)
	r, d := drainHostMeasured(b, brokers, module, row.in, nil, n, row.keys...)
	r.Stop(context.Background())
	b.ReportMetric(float64(requests.Load()), "registry_requests")
	checkOrders(b, brokers, client, row, ends, n)
	return d
}

// endOffsets is where each partition of topic ends: a row's outputs are
// those written after (a row that runs again writes to the same topic).
func endOffsets(b *testing.B, brokers []string, topic string) map[string]map[int32]kgo.Offset {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(kafkatest.Client(b, brokers)).ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		b.Fatalf("end offsets of %s: %v %v", topic, err, ends.Error())
	}
	from := map[string]map[int32]kgo.Offset{topic: {}}
	ends.Each(func(o kadm.ListedOffset) { from[topic][o.Partition] = kgo.NewOffset().At(o.Offset) })
	return from
}

// schemaInput registers row's schema as its input topic's and output
// topic's value subject and fills the input with n orders framed with it.
func schemaInput(b *testing.B, brokers []string, reg *srfake.Registry, client *schemareg.Client, row *schemaRow, n int) {
	row.in = fmt.Sprintf("bench-sr-%s-%d", row.name, time.Now().UnixNano())
	for _, subject := range []string{row.in + "-value", row.in + "-out-value"} {
		id, _, err := reg.RegisterSchema(subject, sr.Schema{Schema: row.text, Type: row.typ})
		if err != nil {
			b.Fatalf("registering %s: %v", subject, err)
		}
		row.outID = id // the same text: the same id under both subjects
	}
	row.keys = []string{"input_format: {value: {format: confluent}}", "output_format: {value: {format: confluent}}"}
	enc, err := client.NewEncoder(context.Background(), schemareg.EncoderConfig{Subject: row.in + "-value"})
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close()
	kafkatest.CreateTopic(b, brokers, partitions, row.in)
	kafkatest.Produce(b, brokers, row.in, n, func(i int) string {
		v, err := enc.AppendFramed(nil, []byte(orderJSON(i, row.typ)))
		if err != nil {
			b.Fatalf("framing order %d as %s: %v", i, row.name, err)
		}
		return string(v)
	})
}

// rawInput fills row's input with the JSON the Avro row's guest reads:
// each framed order of avroIn decoded as the host decodes it.
func rawInput(b *testing.B, brokers []string, client *schemareg.Client, row *schemaRow, avroIn string, n int) {
	rd := kafkatest.NewReader(b, brokers, avroIn)
	rd.ReadUntil(b, 2*time.Minute, "the framed Avro orders", func(rs []*kgo.Record) bool { return len(rs) >= n })
	row.in = fmt.Sprintf("bench-sr-raw-%d", time.Now().UnixNano())
	kafkatest.CreateTopic(b, brokers, partitions, row.in)
	kafkatest.Produce(b, brokers, row.in, n, func(i int) string {
		js, _, err := client.AppendJSON(context.Background(), nil, rd.Recs[i].Value, wire.Value, nil, 1<<20)
		if err != nil {
			b.Fatalf("decoding a framed order: %v", err)
		}
		return string(js)
	})
}

// orderJSON is order i as the JSON a producer would frame: the coupon (the
// Avro union, Protobuf's optional field) null on even orders, left out of
// the Protobuf JSON there; the id a string for Protobuf (its JSON of an
// int64).
func orderJSON(i int, typ sr.SchemaType) string {
	id, coupon := strconv.Itoa(i), `,"coupon":"SPRING-`+strconv.Itoa(i%7)+`"`
	if typ == sr.TypeProtobuf {
		id = strconv.Quote(id)
	}
	if i%2 == 0 {
		coupon = `,"coupon":null`
		if typ == sr.TypeProtobuf {
			coupon = ""
		}
	}
	at := time.UnixMilli(1_767_225_600_000 + int64(i)*1013).UTC().Format("2006-01-02T15:04:05.000Z")
	items := `"book","pen"`
	if i%3 == 0 {
		items = `"lamp"`
	}
	return fmt.Sprintf(`{"id":%s,"customer":"customer-%d","amount":%d.25,"placed_at":%q,"items":[%s]%s,"priority":%d}`,
		id, i, i%1000, at, items, coupon, i%5)
}

// checkOrders reads row's outputs back and fails b unless there are n,
// each (decoded, for a confluent row, and written with the output
// subject's schema) the order of its input with the customer upper-cased.
func checkOrders(b *testing.B, brokers []string, client *schemareg.Client, row *schemaRow, from map[string]map[int32]kgo.Offset, n int) {
	cl := kafkatest.Client(b, brokers, kgo.ConsumePartitions(from))
	var recs []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for len(recs) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	// Past n, what is there already is read (a duplicate would be).
	rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer rcancel()
	cl.PollFetches(rctx).EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	if len(recs) != n {
		b.Fatalf("%s: %d outputs, want %d", row.name, len(recs), n)
	}
	seen := make([]bool, n)
	var js []byte
	for _, rec := range recs {
		js = append(js[:0], rec.Value...)
		if row.text != "" {
			var d schemareg.Decoded
			var err error
			if js, d, err = client.AppendJSON(context.Background(), js[:0], rec.Value, wire.Value, nil, 1<<20); err != nil || d.SchemaID != row.outID {
				b.Fatalf("%s: output %x: schema id %d, want %d (%v)", row.name, rec.Value, d.SchemaID, row.outID, err)
			}
		}
		var o struct {
			ID       json.RawMessage `json:"id"`
			Customer string          `json:"customer"`
		}
		if err := json.Unmarshal(js, &o); err != nil {
			b.Fatalf("%s: output %s: %v", row.name, js, err)
		}
		i, err := strconv.Atoi(strings.TrimPrefix(o.Customer, "CUSTOMER-"))
		id := strings.Trim(string(o.ID), `"`)
		if id == "" {
			id = "0" // Protobuf's JSON leaves a field at its default out
		}
		if err != nil || i < 0 || i >= n || seen[i] || id != strconv.Itoa(i) {
			b.Fatalf("%s: output %s: want each order once, its customer upper-cased and its id kept", row.name, js)
		}
		seen[i] = true
	}
}

// loadAverage is the first three fields of /proc/loadavg, for the log.
func loadAverage() string {
	s, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(s))[:3], " ")
}
