package conformance

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
)

// A vectors file gives a processor's own records and, optionally, what each
// must produce: JSON lines, one record a line (blank lines and lines
// starting with # are skipped). `wasmstream test --file` and `wasmstream
// conformance --vectors` read it. A line:
//
//	{"name": "greeting",                   optional; default "line N"
//	 "topic": "in", "partition": 0,         optional; default the pipeline's first input, 0
//	 "offset": 0, "timestamp": 0,           optional; default the record's index, 0
//	 "key": "k", "value": "hello",          text, null (the default), or any other JSON
//	                                        value (written as its JSON text)
//	 "key_base64": "...", "value_base64": "...",   binary instead of key / value
//	 "headers": {"h": "v", "n": null},      in file order; a key may repeat
//	 "attempt": 1,                          optional; default 1
//	 "http": [{"status": 200, "body": "{}", "headers": {"content-type": "application/json"}},
//	          {"error": "connection reset"}],
//	                                        the answers to the record's HTTP requests,
//	                                        in order, when no real service is granted
//	 "expect": {"outcome": "ok",            ok (at least one output), drop (ok, none),
//	                                        retry or fail
//	            "fault": "panic",           optional: the fault kind of a retry or fail
//	            "error": "substring",       optional: in the failure's message
//	            "outputs": [{"topic": "", "key": "k", "value": "HELLO",
//	                         "headers": {"h": "v"}}]}}
//
// Expected outputs are compared in order: topic ("" or absent: the
// pipeline's output), key and value (text, null, or any other JSON value,
// then compared as JSON, so spacing and key order do not matter), and
// headers when given ({} means none). Omitting "outputs" checks only the
// outcome.
//
// A line with advance_to, advance, idle, state or expect_state is a
// control line instead (control.go): it moves `wasmstream test`'s stream
// time or touches its state between records, and takes no record's index.

// Case is one record of a vectors file.
type Case struct {
	Line   int    // 1-based line in the file (0 for a record given otherwise)
	Name   string // "line N" unless named
	Record abi.Record
	// HTTP answers the record's HTTP requests in order (the local fake).
	HTTP []HTTPAnswer
	// Expect is what the record must produce; nil: anything.
	Expect *Expect
	// KeyFrame and ValueFrame say how the key and value are framed for
	// a schema registry (framed.go).
	KeyFrame, ValueFrame Frame
	// Control, when set, makes the line a control line (control.go), not
	// a record: Record is unset, and Expect checks the outputs of the
	// timers it fires.
	Control *Control
}

// HTTPAnswer is one answer of the local fake HTTP service: a response, or a
// transport error when Error is set.
type HTTPAnswer struct {
	Status  int
	Headers []abi.Header
	Body    []byte
	Error   string
}

// Result encodes the answer as an operation's completion.
func (a HTTPAnswer) Result() []byte {
	if a.Error != "" {
		return abi.AppendCompletionError(nil, abi.CompletionError, a.Error)
	}
	return abi.AppendCompletionOK(nil, abi.AppendHTTPResponse(nil, &abi.HTTPResponse{Status: a.Status, Headers: a.Headers, Body: a.Body}))
}

// Outcomes an expectation names.
const (
	OutcomeOK    = "ok"
	OutcomeDrop  = "drop"
	OutcomeRetry = "retry"
	OutcomeFail  = "fail"
)

// Expect is what a record must produce.
type Expect struct {
	Outcome string // OutcomeOK, OutcomeDrop, OutcomeRetry, OutcomeFail
	Fault   string // the fault kind of a failure ("": any, or none)
	Error   string // a substring of the failure's message
	Outputs []ExpectOutput
	// HasOutputs: the outputs are checked (an empty list means none).
	HasOutputs bool
}

// ExpectOutput is one expected output.
type ExpectOutput struct {
	Topic      string
	Key, Value jsonBytes
	Headers    []abi.Header
	HasHeaders bool
	// KeyFrame and ValueFrame say how the expected key and value are
	// framed for a schema registry (framed.go).
	KeyFrame, ValueFrame Frame
}

// jsonBytes is a field given as text, null or other JSON.
type jsonBytes struct {
	b    []byte
	json bool // b is JSON text: compared as JSON
}

func (j jsonBytes) String() string {
	if j.b == nil {
		return "null"
	}
	return strconv.Quote(string(j.b))
}

// matches compares got with the expected field.
func (j jsonBytes) matches(got []byte) bool {
	if j.b == nil || got == nil {
		return j.b == nil && got == nil
	}
	if !j.json {
		return bytes.Equal(j.b, got)
	}
	var a, b any
	if json.Unmarshal(j.b, &a) != nil || json.Unmarshal(got, &b) != nil {
		return bytes.Equal(j.b, got)
	}
	return reflect.DeepEqual(a, b)
}

// differs is how got differs from the expected field, named name: none
// when it matches; a line for each differing field when both are JSON
// objects or arrays (fieldDiff), else the two whole.
func (j jsonBytes) differs(name string, got []byte) []string {
	if j.matches(got) {
		return nil
	}
	if j.json && got != nil {
		if d := fieldDiff(name, got, j.b); len(d) > 0 {
			return d
		}
	}
	return []string{fmt.Sprintf("%s: got %s, want %s", name, quoteBytes(got), j)}
}

// MaxCaseLine bounds one line of a vectors file (16 MiB).
const MaxCaseLine = 16 << 20

// ReadCases reads the vectors file at path.
func ReadCases(path string) ([]Case, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseCases(f, path)
}

// ParseCases reads a vectors file from r; file names it in errors, which
// give the line and the field ("vectors.jsonl:3: expect.outcome: ...").
func ParseCases(r io.Reader, file string) ([]Case, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxCaseLine)
	var cases []Case
	records := 0 // a record's default offset is its index among the records
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		var c Case
		var err error
		if isControl(line) {
			c, err = parseControl(line)
		} else {
			c, err = parseCase(line, records)
			records++
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", file, n, err)
		}
		c.Line = n
		if c.Name == "" {
			c.Name = fmt.Sprintf("line %d", n)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("a line is longer than %d MiB", MaxCaseLine>>20)
		}
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("%s: no records (one JSON object a line)", file)
	}
	return cases, nil
}

type caseJSON struct {
	Name        string          `json:"name"`
	Topic       *string         `json:"topic"`
	Partition   int32           `json:"partition"`
	Offset      *int64          `json:"offset"`
	Timestamp   int64           `json:"timestamp"`
	Key         json.RawMessage `json:"key"`
	Value       json.RawMessage `json:"value"`
	KeyBase64   *string         `json:"key_base64"`
	ValueBase64 *string         `json:"value_base64"`
	Headers     json.RawMessage `json:"headers"`
	Attempt     *int64          `json:"attempt"`
	HTTP        []httpJSON      `json:"http"`
	Expect      *expectJSON     `json:"expect"`
	frameFields
}

// httpJSON is one of a case's "http" answers.
type httpJSON struct {
	Status  int             `json:"status"`
	Headers json.RawMessage `json:"headers"`
	Body    json.RawMessage `json:"body"`
	Error   string          `json:"error"`
}

// expectJSON is a case's "expect".
type expectJSON struct {
	Outcome string        `json:"outcome"`
	Fault   string        `json:"fault"`
	Error   string        `json:"error"`
	Outputs *[]outputJSON `json:"outputs"`
}

// outputJSON is one of "expect"'s outputs.
type outputJSON struct {
	Topic   string          `json:"topic"`
	Key     json.RawMessage `json:"key"`
	Value   json.RawMessage `json:"value"`
	Headers json.RawMessage `json:"headers"`
	frameFields
}

func strictUnmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

func parseCase(line []byte, index int) (Case, error) {
	var j caseJSON
	if err := strictUnmarshal(line, &j); err != nil {
		return Case{}, fmt.Errorf("not a record object: %w", err)
	}
	rec, err := j.record(index)
	if err != nil {
		return Case{}, err
	}
	c := Case{Name: j.Name, Record: rec}
	if c.KeyFrame, c.ValueFrame, err = j.frames("", j.Key, j.Value, j.KeyBase64 != nil, j.ValueBase64 != nil); err != nil {
		return Case{}, err
	}
	for i, h := range j.HTTP {
		a, err := h.answer(fmt.Sprintf("http[%d]", i))
		if err != nil {
			return Case{}, err
		}
		c.HTTP = append(c.HTTP, a)
	}
	if j.Expect == nil {
		return c, nil
	}
	if c.Expect, err = j.Expect.expect(); err != nil {
		return Case{}, err
	}
	return c, nil
}

// record is the case's record, the index-th of its file.
func (j *caseJSON) record(index int) (abi.Record, error) {
	rec := abi.Record{Partition: j.Partition, Offset: int64(index), Timestamp: j.Timestamp, Attempt: 1}
	if j.Topic != nil {
		rec.Topic = *j.Topic
	}
	if j.Offset != nil {
		rec.Offset = *j.Offset
	}
	if j.Attempt != nil {
		if *j.Attempt < 1 || *j.Attempt > 1<<31 {
			return rec, fmt.Errorf("attempt: %d: want 1 or more", *j.Attempt)
		}
		rec.Attempt = uint32(*j.Attempt)
	}
	var err error
	if rec.Key, err = bytesField("key", j.Key, j.KeyBase64); err != nil {
		return rec, err
	}
	if rec.Value, err = bytesField("value", j.Value, j.ValueBase64); err != nil {
		return rec, err
	}
	if rec.Headers, err = headersField("headers", j.Headers); err != nil {
		return rec, err
	}
	return rec, nil
}

// answer is the HTTP answer h, the case's field.
func (h *httpJSON) answer(field string) (HTTPAnswer, error) {
	a := HTTPAnswer{Status: h.Status, Error: h.Error}
	if a.Error == "" && (a.Status < 100 || a.Status > 599) {
		return a, fmt.Errorf("%s.status: %d: want 100 to 599 (or \"error\" for a transport error)", field, h.Status)
	}
	var err error
	if a.Headers, err = headersField(field+".headers", h.Headers); err != nil {
		return a, err
	}
	body, err := textOrJSON(field+".body", h.Body)
	if err != nil {
		return a, err
	}
	a.Body = body.b
	return a, nil
}

// expect is the case's expectation, checked to be one a record can meet.
func (j *expectJSON) expect() (*Expect, error) {
	e := &Expect{Outcome: j.Outcome, Fault: j.Fault, Error: j.Error}
	switch e.Outcome {
	case OutcomeOK, OutcomeDrop, OutcomeRetry, OutcomeFail:
	default:
		return nil, fmt.Errorf("expect.outcome: %q: want ok, drop, retry or fail", e.Outcome)
	}
	if e.Fault != "" {
		if e.Outcome != OutcomeRetry && e.Outcome != OutcomeFail {
			return nil, fmt.Errorf("expect.fault: %q with outcome %q: a fault is a retry or a fail", e.Fault, e.Outcome)
		}
		if !knownFault(e.Fault) {
			return nil, fmt.Errorf("expect.fault: %q: want one of %s", e.Fault, strings.Join(faultNames(), ", "))
		}
	}
	if e.Error != "" && (e.Outcome == OutcomeOK || e.Outcome == OutcomeDrop) {
		return nil, fmt.Errorf("expect.error with outcome %q: only a failure has a message", e.Outcome)
	}
	if j.Outputs != nil {
		if err := e.setOutputs(*j.Outputs); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// setOutputs sets the outputs e expects, checked against its outcome.
func (e *Expect) setOutputs(outs []outputJSON) error {
	switch {
	case e.Outcome == OutcomeDrop && len(outs) > 0:
		return errors.New("expect.outputs with outcome \"drop\": a dropped record has none")
	case (e.Outcome == OutcomeRetry || e.Outcome == OutcomeFail) && len(outs) > 0:
		return fmt.Errorf("expect.outputs with outcome %q: a failed record's outputs are discarded", e.Outcome)
	case e.Outcome == OutcomeOK && len(outs) == 0:
		return errors.New("expect.outputs is empty with outcome \"ok\": say \"drop\" for a record with no outputs")
	}
	e.HasOutputs = true
	for i, o := range outs {
		eo, err := o.output(fmt.Sprintf("expect.outputs[%d]", i))
		if err != nil {
			return err
		}
		e.Outputs = append(e.Outputs, eo)
	}
	return nil
}

// output is the output o expects, the expectation's field.
func (o *outputJSON) output(field string) (ExpectOutput, error) {
	eo := ExpectOutput{Topic: o.Topic}
	var err error
	if eo.Key, err = textOrJSON(field+".key", o.Key); err != nil {
		return eo, err
	}
	if eo.Value, err = textOrJSON(field+".value", o.Value); err != nil {
		return eo, err
	}
	if eo.KeyFrame, eo.ValueFrame, err = o.frames(field+".", o.Key, o.Value, false, false); err != nil {
		return eo, err
	}
	if len(o.Headers) > 0 {
		eo.HasHeaders = true
		if eo.Headers, err = headersField(field+".headers", o.Headers); err != nil {
			return eo, err
		}
	}
	return eo, nil
}

func knownFault(k string) bool {
	for _, f := range faultNames() {
		if f == k {
			return true
		}
	}
	return false
}

func faultNames() []string {
	names := make([]string, 0, len(host.RetryableFaultKinds)+1)
	for _, k := range host.RetryableFaultKinds {
		names = append(names, string(k))
	}
	return append(names, string(host.FaultCanceled))
}

// textOrJSON reads a field given as text (a JSON string), null or absent
// (nil), or any other JSON value (its compact JSON text).
func textOrJSON(field string, raw json.RawMessage) (jsonBytes, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return jsonBytes{}, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return jsonBytes{}, fmt.Errorf("%s: %w", field, err)
		}
		return jsonBytes{b: []byte(s)}, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return jsonBytes{}, fmt.Errorf("%s: %w", field, err)
	}
	return jsonBytes{b: buf.Bytes(), json: true}, nil
}

func bytesField(field string, raw json.RawMessage, b64 *string) ([]byte, error) {
	if b64 != nil {
		if len(bytes.TrimSpace(raw)) > 0 {
			return nil, fmt.Errorf("%s and %s_base64: give one", field, field)
		}
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, fmt.Errorf("%s_base64: %w", field, err)
		}
		return b, nil
	}
	j, err := textOrJSON(field, raw)
	return j.b, err
}

// headersField reads {"k": "v", "k2": null, "k": "again"} in file order
// (a key may repeat; a value is text or null).
func headersField(field string, raw json.RawMessage) ([]abi.Header, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("%s: want an object of header names to text values (or null)", field)
	}
	hs := []abi.Header{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		k := t.(string)
		var v *string
		if err := d.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s[%q]: want text or null", field, k)
		}
		h := abi.Header{Key: k}
		if v != nil {
			h.Value = []byte(*v)
		}
		hs = append(hs, h)
	}
	return hs, nil
}

// Decision is how a record ended, as `wasmstream test` prints it.
type Decision struct {
	Outcome string // ok, drop, retry, fail
	Fault   host.FaultKind
	Message string
	Outputs []abi.Output
}

// DecisionOf reads a host result. A record still pending is not decided:
// the caller waits for it first.
func DecisionOf(res host.Result) Decision {
	d := Decision{Outputs: res.Outputs}
	switch res.Status {
	case abi.StatusOK:
		d.Outcome = OutcomeOK
		if len(res.Outputs) == 0 {
			d.Outcome = OutcomeDrop
		}
	case abi.StatusRetry:
		d.Outcome = OutcomeRetry
	default:
		d.Outcome = OutcomeFail
	}
	if f := res.Fault(); f != nil {
		d.Fault = f.Kind
	}
	if res.Err != nil {
		d.Message = res.Err.Error()
	}
	return d
}

// Check compares a decision with the expectation: nil when it matches,
// else one line per difference.
func (e *Expect) Check(d Decision) []string {
	var diff []string
	if d.Outcome != e.Outcome {
		got := d.Outcome
		if d.Outcome == OutcomeOK {
			got = fmt.Sprintf("ok with %d output(s)", len(d.Outputs))
		}
		if d.Fault != "" {
			got += " (" + string(d.Fault) + " fault)"
		}
		if d.Message != "" {
			got += ": " + OneLine(d.Message, 200)
		}
		diff = append(diff, fmt.Sprintf("outcome: got %s, want %s", got, e.Outcome))
		if !(e.Outcome == OutcomeOK && d.Outcome == OutcomeDrop) {
			return diff
		}
	}
	if e.Fault != "" && string(d.Fault) != e.Fault {
		got := "no fault"
		if d.Fault != "" {
			got = string(d.Fault)
		}
		diff = append(diff, fmt.Sprintf("fault: got %s, want %s", got, e.Fault))
	}
	if e.Error != "" && !strings.Contains(d.Message, e.Error) {
		diff = append(diff, fmt.Sprintf("error: got %q, want it to contain %q", OneLine(d.Message, 200), e.Error))
	}
	if !e.HasOutputs {
		return diff
	}
	if len(d.Outputs) != len(e.Outputs) {
		diff = append(diff, fmt.Sprintf("outputs: got %d, want %d", len(d.Outputs), len(e.Outputs)))
	}
	for i := 0; i < min(len(d.Outputs), len(e.Outputs)); i++ {
		g, w := &d.Outputs[i], &e.Outputs[i]
		p := fmt.Sprintf("output %d ", i)
		if g.Topic != w.Topic {
			diff = append(diff, fmt.Sprintf("%stopic: got %s, want %s", p, topicName(g.Topic), topicName(w.Topic)))
		}
		diff = append(diff, w.Key.differs(p+"key", g.Key)...)
		diff = append(diff, w.Value.differs(p+"value", g.Value)...)
		if w.HasHeaders && !sameHeaders(g.Headers, w.Headers) {
			diff = append(diff, fmt.Sprintf("%sheaders: got %s, want %s", p, HeadersString(g.Headers), HeadersString(w.Headers)))
		}
	}
	return diff
}

func topicName(t string) string {
	if t == "" {
		return "the pipeline's output"
	}
	return strconv.Quote(t)
}

func sameHeaders(a, b []abi.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || (a[i].Value == nil) != (b[i].Value == nil) || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

// quoteBytes shows a key or value: null, or quoted (shortened past 200
// bytes).
func quoteBytes(b []byte) string {
	if b == nil {
		return "null"
	}
	if len(b) > 200 {
		return fmt.Sprintf("%q…(%d bytes)", b[:200], len(b))
	}
	return strconv.Quote(string(b))
}

// HeadersString shows headers as {"k": "v", "n": null}.
func HeadersString(hs []abi.Header) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, h := range hs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(h.Key))
		b.WriteString(": ")
		b.WriteString(quoteBytes(h.Value))
	}
	b.WriteByte('}')
	return b.String()
}

// OneLine is s on one line, cut at n bytes.
func OneLine(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
