package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// byPropagator is what OpenTelemetry's TraceContext propagator reads from
// a traceparent and tracestate: what parentOf must read too.
func byPropagator(tp, ts []byte) trace.SpanContext {
	if tp == nil {
		return trace.SpanContext{}
	}
	c := propagation.MapCarrier{HeaderTraceparent: string(tp)}
	if ts != nil {
		c[HeaderTracestate] = string(ts)
	}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), c))
}

func headers(tp, ts []byte) Headers {
	return HeaderFunc(func(k string) []byte {
		switch k {
		case HeaderTraceparent:
			return tp
		case HeaderTracestate:
			return ts
		}
		return nil
	})
}

var traceparentSeeds = []string{
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-04",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
	"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-what-comes-next",
	"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"fe-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
	"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
	"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
	"0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
	"",
	"-",
}

// parentOf reads a record's upstream trace exactly as the propagator does,
// and allocates nothing for a traceparent without a tracestate.
func TestParentOfAgreesWithPropagator(t *testing.T) {
	for _, tp := range traceparentSeeds {
		for _, ts := range []string{"", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", "not a=tracestate"} {
			var tsb []byte
			if ts != "" {
				tsb = []byte(ts)
			}
			want, got := byPropagator([]byte(tp), tsb), parentOf(headers([]byte(tp), tsb))
			if !got.Equal(want) || got.IsRemote() != want.IsRemote() {
				t.Errorf("traceparent %q, tracestate %q: read %v, the propagator reads %v", tp, ts, got, want)
			}
		}
	}
	hs := headers([]byte(traceparentSeeds[0]), nil)
	if n := testing.AllocsPerRun(100, func() { parentOf(hs) }); n != 0 {
		t.Fatalf("parentOf: %.1f allocations, want 0", n)
	}
}

func FuzzParentOf(f *testing.F) {
	for _, tp := range traceparentSeeds {
		f.Add([]byte(tp), []byte("rojo=00f067aa0ba902b7"))
	}
	f.Fuzz(func(t *testing.T, tp, ts []byte) {
		want, got := byPropagator(tp, ts), parentOf(headers(tp, ts))
		if !got.Equal(want) || got.IsRemote() != want.IsRemote() {
			t.Fatalf("traceparent %q, tracestate %q: read %v, the propagator reads %v", tp, ts, got, want)
		}
	})
}
