package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/jsonw"
)

// The expected behaviour of each example, from its specification
// (plugins/examples/README.md), written here in Go: what a conforming
// module in any language must produce for each vector.

// want judges one vector's outcome: "" when it conforms, else why not.
type want func(Outcome) string

func wantOutputs(outs ...abi.Output) want {
	enc := make([][]byte, len(outs))
	for i := range outs {
		enc[i] = abi.AppendOutput(nil, &outs[i])
	}
	return func(o Outcome) string {
		if o.Status != abi.StatusOK || o.Fault != "" {
			return fmt.Sprintf("status %s%s, want ok with %d output(s)", o.Status, o.errSuffix(), len(outs))
		}
		if len(o.Outputs) != len(enc) {
			return fmt.Sprintf("%d output(s), want %d", len(o.Outputs), len(enc))
		}
		for i := range enc {
			if !bytes.Equal(o.Outputs[i], enc[i]) {
				return fmt.Sprintf("output %d differs:\n      got  %s\n      want %s", i, describeOutput(o.Outputs[i]), describeOutput(enc[i]))
			}
		}
		return ""
	}
}

// wantFailure: the guest reports the failure itself (a status, no fault)
// with one of the statuses given, and nothing is emitted.
func wantFailure(sts ...abi.Status) want {
	return func(o Outcome) string {
		for _, s := range sts {
			if o.Status == s && o.Fault == "" && o.HasError {
				return ""
			}
		}
		return fmt.Sprintf("status %s%s, want a guest-reported failure: %v", o.Status, o.errSuffix(), sts)
	}
}

// wantFailureOrFault is wantFailure, or one of the fault kinds.
func wantFailureOrFault(sts []abi.Status, kinds ...host.FaultKind) want {
	wf := wantFailure(sts...)
	return func(o Outcome) string {
		for _, k := range kinds {
			if o.Fault == k {
				return ""
			}
		}
		if msg := wf(o); msg != "" {
			return fmt.Sprintf("%s or a fault: %v", msg, kinds)
		}
		return ""
	}
}

func upper(r *abi.Record) abi.Output {
	v := r.Value
	if v != nil {
		v = bytes.ToUpper(v)
	}
	return abi.Output{Partition: -1, Key: r.Key, Value: v, Headers: r.Headers}
}

// expectUppercase: one output, to the pipeline's output topic, partitioned
// by key, with the value upper-cased as Go's bytes.ToUpper does (Unicode
// simple case mapping; invalid UTF-8 bytes become U+FFFD), a null value
// kept null, the key and headers as they came.
func expectUppercase(v Vector) want { return wantOutputs(upper(&v.Record)) }

// expectFilter: the record as it came when its value contains the value of
// its first "match" header (or "keep" without one), else nothing.
func expectFilter(v Vector) want {
	r := &v.Record
	m := []byte("keep")
	for _, h := range r.Headers {
		if h.Key == "match" {
			m = h.Value
			break
		}
	}
	if !bytes.Contains(r.Value, m) {
		return wantOutputs()
	}
	return wantOutputs(abi.Output{Partition: -1, Key: r.Key, Value: r.Value, Headers: r.Headers})
}

// LookupURL is the LOOKUP_URL the lookup example is given; its requests
// never leave the process (the kit answers them, lookupAnswer).
const LookupURL = "http://lookup.conformance.test/users/"

// lookupAnswer is the kit's lookup service: how it answers a key.
type lookupAnswer struct {
	code   byte // abi.Completion*
	status int
	body   []byte
	msg    string
}

func answerFor(key string) lookupAnswer {
	switch {
	case strings.HasPrefix(key, "gone"):
		return lookupAnswer{status: 404, body: []byte("no such user")}
	case strings.HasPrefix(key, "fail"):
		return lookupAnswer{status: 503, body: []byte("overloaded")}
	case strings.HasPrefix(key, "bad"):
		return lookupAnswer{status: 400, body: []byte("bad request")}
	case strings.HasPrefix(key, "error"):
		return lookupAnswer{code: abi.CompletionError, msg: "connection reset by peer"}
	case strings.HasPrefix(key, "refused"):
		return lookupAnswer{code: abi.CompletionRefused, msg: "host lookup.conformance.test is not allowed (async.http.allow_hosts)"}
	}
	body, _ := json.Marshal(struct {
		ID   string `json:"id"`
		Name string `json:"name"`
		Tier int    `json:"tier"`
	}{key, "user " + key, len(key) % 3})
	return lookupAnswer{status: 200, body: body}
}

func (a lookupAnswer) result() []byte {
	if a.code != abi.CompletionOK {
		return abi.AppendCompletionError(nil, a.code, a.msg)
	}
	return abi.AppendCompletionOK(nil, abi.AppendHTTPResponse(nil, &abi.HTTPResponse{Status: a.status,
		Headers: []abi.Header{{Key: "Content-Type", Value: []byte("application/json")}}, Body: a.body}))
}

// expectLookup: the lookup example's rules (plugins/examples/lookup): a
// null key fails terminally; "pending" without an operation fails (or is the
// protocol fault the ABI makes of it); otherwise a GET of
// LOOKUP_URL+key, whose 200 or 404 answer gives one output
// {"key":..,"record":..,"lookup":..,"attempt":N} with the header
// lookup.status, a 5xx or a transport error fails retryably, another 4xx
// or a refusal fails terminally.
func expectLookup(v Vector) want {
	r := &v.Record
	if r.Key == nil {
		return wantFailure(abi.StatusFail)
	}
	mode := ""
	for _, h := range r.Headers {
		if h.Key == "lookup.mode" {
			mode = string(h.Value)
			break
		}
	}
	if mode == "pending" {
		return wantFailureOrFault([]abi.Status{abi.StatusFail}, host.FaultProtocol)
	}
	a := answerFor(string(r.Key))
	switch {
	case a.code == abi.CompletionError:
		return wantFailure(abi.StatusRetry)
	case a.code == abi.CompletionRefused:
		return wantFailure(abi.StatusFail)
	case a.status == 200 || a.status == 404:
		var found []byte
		if a.status == 200 {
			found = a.body
		}
		return wantOutputs(abi.Output{Partition: -1, Key: r.Key, Value: lookupValue(r, found),
			Headers: []abi.Header{{Key: "lookup.status", Value: []byte(strconv.Itoa(a.status))}}})
	case a.status == 429 || a.status >= 500:
		return wantFailure(abi.StatusRetry)
	}
	return wantFailure(abi.StatusFail)
}

// lookupKey is the key a lookup request asks for, as a service would read
// it from the URL's path.
func lookupKey(rawURL string) (string, error) {
	if !strings.HasPrefix(rawURL, LookupURL) {
		return "", fmt.Errorf("URL %q does not start with LOOKUP_URL %q", rawURL, LookupURL)
	}
	rest := rawURL[len(LookupURL):]
	if strings.ContainsAny(rest, "/?#") {
		return "", fmt.Errorf("URL %q: the key is not path-escaped (it holds /, ? or #)", rawURL)
	}
	return url.PathUnescape(rest)
}

// lookupValue is the lookup example's output value.
func lookupValue(r *abi.Record, found []byte) []byte {
	b := append([]byte(nil), `{"key":`...)
	b = jsonw.AppendString(b, r.Key)
	b = append(b, `,"record":`...)
	b = jsonw.AppendValue(b, r.Value)
	b = append(b, `,"lookup":`...)
	b = jsonw.AppendValue(b, found)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(r.Attempt), 10)
	return append(b, '}')
}

func expectationOf(example string) func(Vector) want {
	switch example {
	case "uppercase":
		return expectUppercase
	case "filter":
		return expectFilter
	case "lookup":
		return expectLookup
	}
	return nil
}

// describeOutput prints an encoded output briefly.
func describeOutput(enc []byte) string {
	o, err := abi.DecodeOutput(enc)
	if err != nil {
		return fmt.Sprintf("undecodable (%v)", err)
	}
	short := func(b []byte) string {
		if b == nil {
			return "null"
		}
		if len(b) > 80 {
			return fmt.Sprintf("%q…(%d bytes)", b[:80], len(b))
		}
		return fmt.Sprintf("%q", b)
	}
	var hs strings.Builder
	for i, h := range o.Headers {
		if i == 6 {
			fmt.Fprintf(&hs, " …%d more", len(o.Headers)-i)
			break
		}
		fmt.Fprintf(&hs, " %q=%s", h.Key, short(h.Value))
	}
	return fmt.Sprintf("topic %q partition %d key %s value %s headers[%d]%s", o.Topic, o.Partition, short(o.Key), short(o.Value), len(o.Headers), hs.String())
}
