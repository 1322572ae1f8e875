package tracing

import (
	"bytes"

	"go.opentelemetry.io/otel/trace"
)

// parentOf is the upstream span context a record's traceparent (and
// tracestate) headers carry, invalid when it has none. It reads them as
// OpenTelemetry's TraceContext propagator does (Extract), but from the
// header bytes, without a carrier map, string copies or a context: a
// record's upstream trace is read for every healthy record decided
// (Tracer.Keep), and only a tracestate, which a kept record carries on,
// is copied. FuzzParentOf holds the two to the same answers.
func parentOf(hs Headers) trace.SpanContext {
	h := hs.Header(HeaderTraceparent)
	if len(h) == 0 {
		return trace.SpanContext{}
	}
	var ver [1]byte
	if !hexPart(ver[:], &h, 2) || ver[0] > maxTraceparentVersion {
		return trace.SpanContext{}
	}
	var scc trace.SpanContextConfig
	if !hexPart(scc.TraceID[:], &h, 32) || !hexPart(scc.SpanID[:], &h, 16) {
		return trace.SpanContext{}
	}
	var opts [1]byte
	if !hexPart(opts[:], &h, 2) {
		return trace.SpanContext{}
	}
	if ver[0] == 0 && (len(h) != 0 || opts[0] > 3) {
		return trace.SpanContext{} // version 0 has no more fields and no other flags
	}
	scc.TraceFlags = trace.TraceFlags(opts[0]) & (trace.FlagsSampled | trace.FlagsRandom)
	if ts := hs.Header(HeaderTracestate); len(ts) > 0 {
		// A tracestate that does not parse leaves the traceparent as it is.
		scc.TraceState, _ = trace.ParseTraceState(string(ts))
	}
	scc.Remote = true
	sc := trace.NewSpanContext(scc)
	if !sc.IsValid() {
		return trace.SpanContext{}
	}
	return sc
}

// maxTraceparentVersion: version ff is invalid (W3C Trace Context).
const maxTraceparentVersion = 254

// hexPart decodes the next dash-separated part of *h, which must be n
// lower-case hexadecimal digits, into dst, and moves *h past it.
func hexPart(dst []byte, h *[]byte, n int) bool {
	part, left, _ := bytes.Cut(*h, []byte{'-'})
	*h = left
	if len(part) != n {
		return false
	}
	for i := 0; i < n; i += 2 {
		hi, lo := unhex(part[i]), unhex(part[i+1])
		if hi > 0xf || lo > 0xf {
			return false
		}
		dst[i/2] = hi<<4 | lo
	}
	return true
}

// unhex is a lower-case hexadecimal digit's value, 0xff for any other byte
// (upper case included, as the specification says).
func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return 0xff
}
