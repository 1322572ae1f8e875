//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
	"github.com/wasmstream/wasmstream/tracing"
)

// jaeger returns the query API URL and OTLP/HTTP endpoint of the Jaeger the
// test command started (tests/jaeger/jaeger.sh); the test fails without it.
func jaeger(t *testing.T) (query, otlpHTTP string) {
	query, otlpHTTP = os.Getenv("JAEGER_QUERY"), os.Getenv("JAEGER_OTLP_HTTP")
	if query == "" || otlpHTTP == "" {
		t.Fatal("JAEGER_QUERY and JAEGER_OTLP_HTTP are not set: run the tests through tests/run.sh (make test), which starts Jaeger")
	}
	return
}

func traceIDOf(r *kgo.Record) string {
	parts := strings.Split(kafkatest.Header(r, tracing.HeaderTraceparent), "-")
	if len(parts) != 4 {
		return ""
	}
	return parts[1]
}

// TestTracesInJaeger: on the real broker, exporting over OTLP to a real
// Jaeger, a record that fails twice and then succeeds comes back from
// Jaeger's query API as ONE trace holding its three attempts in order, the
// two retry produces between them and its output; a poison record's trace
// ends at its dead-letter produce; `wasmstream trace --jaeger` prints it.
// The same at sample_ratio 0.01: failed records are traced in full, each
// attempt with its guest call, whatever the ratio.
func TestTracesInJaeger(t *testing.T) {
	for _, ratio := range []string{"1", "0.01"} {
		t.Run("ratio-"+ratio, func(t *testing.T) { checkTracesInJaeger(t, ratio) })
	}
}

func checkTracesInJaeger(t *testing.T, ratio string) {
	brokers := kafkatest.RealBrokers(t)
	query, endpoint := jaeger(t)
	n := names(t)
	cfg, in, out, dlq := retryConfig(t, brokers, n, modules["enrich"], fmt.Sprintf("{max_attempts: 3, backoff: [300ms, 600ms], topic_prefix: %s.r}", n), 1)
	kafkatest.CreateTopic(t, brokers, 1, n+".r.300ms", n+".r.600ms")
	service := "ws-" + n
	replace(t, cfg, "status:", fmt.Sprintf("tracing: {exporter: otlp-http, endpoint: %q, insecure: true, service_name: %q, sample_ratio: %s}\nstatus:", endpoint, service, ratio))
	cl := kafkatest.Client(t, brokers)
	recs := []*kgo.Record{
		{Topic: in, Key: []byte("transient"), Value: []byte(`{"fault":"transient","until":3}`)},
		{Topic: in, Key: []byte("poison"), Value: []byte(`{"fault":"retry"}`)},
	}
	for i := 0; i < 20; i++ {
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprint("h", i)), Value: []byte(fmt.Sprintf(`{"i":%d}`, i))})
	}
	ctx, cancel := ctxTimeout(time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, "run", "--config", cfg)
	outR := kafkatest.NewReader(t, brokers, out)
	outR.ReadUntil(t, time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= 21 })
	dlqR := kafkatest.NewReader(t, brokers, dlq)
	dlqR.ReadUntil(t, time.Minute, "the poison record", func(rs []*kgo.Record) bool { return len(rs) >= 1 })
	if code := p.stop(t, 30*time.Second); code != 0 { // flushes the exporter
		t.Fatalf("exit %d", code)
	}
	var transient *kgo.Record
	for _, r := range outR.Recs {
		if string(r.Key) == "transient" {
			transient = r
		}
	}
	id := traceIDOf(transient)
	if id == "" {
		t.Fatalf("the output carries no traceparent: %v", transient.Headers)
	}
	j := &tracing.Jaeger{URL: query, Service: service}
	var spans []tracing.Span
	kafkatest.Eventually(t, 30*time.Second, "the whole trace in Jaeger", func() bool {
		var err error
		spans, err = j.Trace(id)
		if err != nil {
			t.Logf("jaeger: %v", err)
		}
		return len(spans) >= 9 // 3 attempts, 3 guest calls, 2 retry produces, 1 output
	})
	var attempts []tracing.Span
	produces := map[string][]tracing.Span{}
	byID := map[string]tracing.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
		if s.Service != service {
			t.Fatalf("span %s from service %q", s.Name, s.Service)
		}
		switch s.Kind {
		case "consumer":
			attempts = append(attempts, s)
		case "producer":
			produces[s.Attrs["wasmstream.produce.kind"]] = append(produces[s.Attrs["wasmstream.produce.kind"]], s)
		}
	}
	sort.Slice(attempts, func(a, b int) bool { return attempts[a].Start.Before(attempts[b].Start) })
	if len(attempts) != 3 || len(produces["retry"]) != 2 || len(produces["output"]) != 1 {
		t.Fatalf("Jaeger trace %s: %d attempts, %d retry produces, %d outputs; want 3, 2, 1", id, len(attempts), len(produces["retry"]), len(produces["output"]))
	}
	for i, a := range attempts {
		if a.Attrs["wasmstream.attempt"] != fmt.Sprint(i+1) || a.Attrs["messaging.system"] != "kafka" || a.Attrs["messaging.kafka.message.key"] != "transient" {
			t.Fatalf("attempt %d: %v", i+1, a.Attrs)
		}
		if !slices.ContainsFunc(spans, func(s tracing.Span) bool {
			return s.ParentID == a.SpanID && strings.HasPrefix(s.Name, "wasm ") && !s.Start.Before(a.Start) && !s.End.After(a.End)
		}) {
			t.Fatalf("attempt %d has no guest call span within it", i+1)
		}
		if i > 0 {
			parent := byID[a.ParentID]
			if parent.Attrs["wasmstream.produce.kind"] != "retry" || parent.ParentID != attempts[i-1].SpanID {
				t.Fatalf("attempt %d does not follow attempt %d through a retry produce", i+1, i)
			}
		}
	}
	if produces["output"][0].ParentID != attempts[2].SpanID {
		t.Fatal("the output produce is not a child of the third attempt")
	}

	// The poison record's trace ends at the dead letter.
	pid := traceIDOf(dlqR.Recs[0])
	var pspans []tracing.Span
	kafkatest.Eventually(t, 30*time.Second, "the poison record's trace in Jaeger", func() bool {
		pspans, _ = j.Trace(pid)
		for _, s := range pspans {
			if s.Attrs["wasmstream.produce.kind"] == "dead_letter" {
				return true
			}
		}
		return false
	})
	sum := tracing.Summarize(pspans, false)
	if len(sum) != 1 || sum[0].Attempts != 3 || sum[0].Outcome != "dead_letter" {
		t.Fatalf("poison trace: %+v", sum)
	}
	last := pspans[0]
	for _, s := range pspans {
		if s.Start.After(last.Start) {
			last = s
		}
	}
	if last.Attrs["wasmstream.produce.kind"] != "dead_letter" {
		t.Fatalf("the poison trace's last step is %s, not the dead-letter produce", last.Name)
	}

	// The CLI reads the same trace from Jaeger.
	outp, err := exec.Command(binary, "trace", "--jaeger", query, "--service", service, "--trace-id", id).CombinedOutput()
	if err != nil || !strings.Contains(string(outp), "3 attempt(s) · outcome ok") || !strings.Contains(string(outp), "send "+out) {
		t.Fatalf("wasmstream trace --jaeger: %v\n%s", err, outp)
	}
	outp, err = exec.Command(binary, "trace", "--jaeger", query, "--service", service, "--retried").CombinedOutput()
	if err != nil || !strings.Contains(string(outp), id) || !strings.Contains(string(outp), pid) {
		t.Fatalf("wasmstream trace --jaeger --retried: %v\n%s", err, outp)
	}
	t.Logf("trace %s from Jaeger:\n%s", id, func() string {
		o, _ := exec.CommandContext(context.Background(), binary, "trace", "--jaeger", query, "--service", service, "--trace-id", id).CombinedOutput()
		return string(o)
	}())
}

// TestTracesOverOTLPGRPC: the same export over OTLP/gRPC reaches Jaeger.
func TestTracesOverOTLPGRPC(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	query, _ := jaeger(t)
	grpcEndpoint := os.Getenv("JAEGER_OTLP_GRPC")
	if grpcEndpoint == "" {
		t.Fatal("JAEGER_OTLP_GRPC is not set: run the tests through tests/run.sh (make test)")
	}
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 1, in, out, dlq)
	cfg := writeConfig(t, brokers, n, modules["uppercase"], in, out, dlq, "")
	service := "ws-" + n
	replace(t, cfg, "status:", fmt.Sprintf("tracing: {exporter: otlp-grpc, endpoint: %q, insecure: true, service_name: %q}\nstatus:", grpcEndpoint, service))
	kafkatest.Produce(t, brokers, in, 5, func(i int) string { return fmt.Sprint("grpc-", i) })
	p := startProc(t, "run", "--config", cfg)
	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= 5 })
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	id := traceIDOf(rd.Recs[0])
	j := &tracing.Jaeger{URL: query, Service: service}
	kafkatest.Eventually(t, 30*time.Second, "the trace in Jaeger over OTLP/gRPC", func() bool {
		spans, _ := j.Trace(id)
		return len(spans) >= 3 // attempt, guest call, output
	})
}
