package tracing

import (
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// span is a finished span as the record path hands it to the batcher: the
// facts of the attempt, guest call, operation or produce it describes, not
// yet attributes. Building OpenTelemetry attributes and the SDK's span
// snapshot cost more than the rest of tracing a record together
// (RATIONALE.md, "Tracing"), so the record path only fills
// this value; the batcher's goroutine turns it into a JSON line (the jsonl
// and stdout exporters) or into the SDK's ReadOnlySpan (OTLP), and both go
// through one list of attributes, span.attrs.
type span struct {
	what       spanWhat
	sc, parent trace.SpanContext
	// The name is prefix + subject: "process " + topic, "wasm " + export,
	// kind + " " + description, "send " + topic. prefix is ASCII and ends
	// with a space.
	prefix, subject string
	start, end      time.Time
	failed          bool   // the status is an error
	status          string // the status description when failed

	// attempt spans
	info     *Info  // the attempt's, not changed once it ended
	key      string // the record's key as an attribute ("" and noKey when none)
	noKey    bool
	outcome  string
	errKind  string // error.type, "" when the attempt did not fail
	errMsg   string // wasmstream.error
	asyncOp  string // op spans: the operation's kind ("http", "timer")
	opResult string // op spans: "ok" or the error
	method   string // http op spans
	url      string
	// produce spans
	topic     string
	kind      string // ProduceOutput, ProduceRetry, ProduceDeadLetter
	partition int32
	offset    int64
}

type spanWhat uint8

const (
	spanAttempt spanWhat = iota // a consumer span: one attempt of one record
	spanCall                    // an internal span: a call into the guest
	spanOp                      // an internal span: an asynchronous operation
	spanProduce                 // a producer span: an output, retry or dead-letter record
)

func (s *span) spanKind() trace.SpanKind {
	switch s.what {
	case spanAttempt:
		return trace.SpanKindConsumer
	case spanProduce:
		return trace.SpanKindProducer
	}
	return trace.SpanKindInternal
}

// attrWriter takes a span's attributes one by one.
type attrWriter interface {
	str(key, value string)
	i64(key string, value int64)
}

// attrs writes s's attributes to w, in one order: the JSON line and the
// OTLP span carry the same attributes (TestFastJSONMatchesSnapshot).
func (s *span) attrs(w attrWriter) {
	switch s.what {
	case spanAttempt:
		i := s.info
		w.str("messaging.system", "kafka")
		w.str("messaging.operation.type", "process")
		w.str("messaging.operation.name", "process")
		w.str("messaging.destination.name", i.Topic)
		w.i64("messaging.destination.partition.id", int64(i.Partition))
		w.i64("messaging.kafka.offset", i.Offset)
		w.str("messaging.consumer.group.name", i.Group)
		w.str("wasmstream.pipeline", i.Pipeline)
		w.str("wasmstream.module.name", i.Module)
		w.str("wasmstream.module.digest", i.ModuleDigest)
		w.i64("wasmstream.instance.id", int64(i.Instance))
		w.i64("wasmstream.attempt", int64(i.Attempt))
		w.str("wasmstream.origin.topic", i.OriginTopic)
		w.i64("wasmstream.origin.partition", int64(i.OriginPartition))
		w.i64("wasmstream.origin.offset", i.OriginOffset)
		if !s.noKey {
			w.str("messaging.kafka.message.key", s.key)
		}
		w.str("wasmstream.outcome", s.outcome)
		if s.errKind != "" {
			w.str("error.type", s.errKind)
			w.str("wasmstream.error", s.errMsg)
		}
	case spanOp:
		w.str("wasmstream.async.kind", s.asyncOp)
		w.str("wasmstream.async.outcome", s.opResult)
		if s.method != "" {
			w.str("http.request.method", s.method)
			w.str("url.full", s.url)
		}
	case spanProduce:
		w.str("messaging.system", "kafka")
		w.str("messaging.operation.type", "send")
		w.str("messaging.operation.name", "send")
		w.str("messaging.destination.name", s.topic)
		w.str("wasmstream.produce.kind", s.kind)
		w.i64("messaging.destination.partition.id", int64(s.partition))
		w.i64("messaging.kafka.offset", s.offset)
	}
}

// kvs collects attributes for the SDK. Integers that OpenTelemetry's
// semantic conventions give as strings (a partition id) are strings.
type kvs []attribute.KeyValue

func (k *kvs) str(key, v string) { *k = append(*k, attribute.String(key, v)) }
func (k *kvs) i64(key string, v int64) {
	if key == "messaging.destination.partition.id" {
		*k = append(*k, attribute.String(key, strconv.FormatInt(v, 10)))
		return
	}
	*k = append(*k, attribute.Int64(key, v))
}

// readOnly is s as the SDK's exporters take it.
func (s *span) readOnly(res *resource.Resource, scope instrumentation.Scope) sdktrace.ReadOnlySpan {
	var attrs kvs
	s.attrs(&attrs)
	stub := tracetest.SpanStub{Name: s.prefix + s.subject, SpanContext: s.sc, Parent: s.parent, SpanKind: s.spanKind(),
		StartTime: s.start, EndTime: s.end, Attributes: attrs, Resource: res, InstrumentationScope: scope}
	if s.failed {
		stub.Status = sdktrace.Status{Code: codes.Error, Description: s.status}
	}
	return stub.Snapshot()
}
