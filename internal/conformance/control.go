package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Control lines of a vectors file (`wasmstream test` only) are not records:
// they move the run's virtual stream time or touch its state between
// records, as Kafka Streams' TopologyTestDriver does. A line is a control
// line when it has one of these fields, and then exactly one of them:
//
//	{"advance_to": 120000, "expect": {...}}   stream time to 120000 ms (as if a record of
//	                                           that timestamp was decided); the timers
//	                                           due fire, "expect" checks their outputs
//	{"advance": "30s", "expect": {...}}        stream time forward by a duration
//	{"idle": "45s", "expect": {...}}           45s of wall clock on a caught-up partition
//	                                           under the pipeline's timers.idle_advance
//	{"state": {"put": [{"key": "k", "sub": "s", "value": "3"}],
//	           "delete": [{"key": "k"}],
//	           "timers": [{"key": "k", "at": 2100}]}}
//	                                           state (and timers) written before the
//	                                           next record, without moving stream time
//	{"expect_state": {"get": [{"key": "k", "sub": "s", "value": "3"},
//	                          {"key": "gone", "absent": true},
//	                          {"key": "here"}],     present, any value
//	                  "timers": [{"key": "k", "at": 2100}]}}
//	                                           the state at this point; "timers", when
//	                                           given, lists every timer set
//
// Keys, subs and values are text, null or other JSON (its text), or
// key_base64 / sub_base64 / value_base64 for binary. A left-out "sub" is a
// one-part key.

// Control is a control line: one of its actions is set.
type Control struct {
	// Kind is the line's action: "advance_to", "advance", "idle",
	// "state" or "expect_state".
	Kind string
	// AdvanceTo is advance_to's stream time (milliseconds).
	AdvanceTo int64
	// Duration is advance's or idle's.
	Duration time.Duration
	// Put and Delete are state's writes, puts first, then its Timers
	// set.
	Put, Delete []StateEntry
	Timers      []TimerAt
	// ExpectState is expect_state's.
	ExpectState *ExpectState
}

// StateEntry is a state key (Sub set with Two: a two-part key) and, in a
// put or a check, its value.
type StateEntry struct {
	Key, Sub []byte
	Two      bool
	Value    jsonBytes
	// Absent (a check): the key must not be set. Any (a check): set, to
	// any value.
	Absent, Any bool
}

// Name is the key as the run's output shows it: "k" or "k"/"sub".
func (e *StateEntry) Name() string {
	n := strconv.Quote(string(e.Key))
	if e.Two {
		n += "/" + strconv.Quote(string(e.Sub))
	}
	return n
}

// ValueText is a put's value.
func (e *StateEntry) ValueText() []byte { return e.Value.b }

// ExpectState is what the state must hold at an expect_state line.
type ExpectState struct {
	Get []StateEntry
	// Timers, when HasTimers, are every timer the state holds, in (at,
	// key) order.
	Timers    []TimerAt
	HasTimers bool
}

// TimerAt is a timer (key, at).
type TimerAt struct {
	Key []byte
	At  int64
}

// controlFields are the fields that make a line a control line.
var controlFields = []string{"advance_to", "advance", "idle", "state", "expect_state"}

type controlJSON struct {
	Name        string        `json:"name"`
	AdvanceTo   *int64        `json:"advance_to"`
	Advance     *string       `json:"advance"`
	Idle        *string       `json:"idle"`
	State       *stateJSON    `json:"state"`
	ExpectState *expectStJSON `json:"expect_state"`
	Expect      *expectJSON   `json:"expect"`
}

type stateJSON struct {
	Put    []entryJSON `json:"put"`
	Delete []entryJSON `json:"delete"`
	Timers []timerJSON `json:"timers"`
}

type expectStJSON struct {
	Get    []entryJSON  `json:"get"`
	Timers *[]timerJSON `json:"timers"`
}

type entryJSON struct {
	Key         json.RawMessage `json:"key"`
	KeyBase64   *string         `json:"key_base64"`
	Sub         json.RawMessage `json:"sub"`
	SubBase64   *string         `json:"sub_base64"`
	Value       json.RawMessage `json:"value"`
	ValueBase64 *string         `json:"value_base64"`
	Absent      bool            `json:"absent"`
}

type timerJSON struct {
	Key       json.RawMessage `json:"key"`
	KeyBase64 *string         `json:"key_base64"`
	At        int64           `json:"at"`
}

// isControl reports whether the line has a control line's field.
func isControl(line []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return false // parseCase says why
	}
	for _, f := range controlFields {
		if _, ok := m[f]; ok {
			return true
		}
	}
	return false
}

// parseControl reads a control line.
func parseControl(line []byte) (Case, error) {
	var j controlJSON
	if err := strictUnmarshal(line, &j); err != nil {
		return Case{}, fmt.Errorf("not a control line (%s): %w", controlList(), err)
	}
	set := map[string]bool{"advance_to": j.AdvanceTo != nil, "advance": j.Advance != nil, "idle": j.Idle != nil,
		"state": j.State != nil, "expect_state": j.ExpectState != nil}
	var kinds []string
	for _, f := range controlFields {
		if set[f] {
			kinds = append(kinds, f)
		}
	}
	if len(kinds) != 1 {
		return Case{}, fmt.Errorf("a control line has one of %s, not %v", controlList(), kinds)
	}
	ctl := &Control{Kind: kinds[0]}
	c := Case{Name: j.Name, Control: ctl}
	var err error
	switch ctl.Kind {
	case "advance_to":
		if ctl.AdvanceTo = *j.AdvanceTo; ctl.AdvanceTo < 0 {
			return Case{}, fmt.Errorf("advance_to: %d: want a timestamp of 0 or more (milliseconds)", ctl.AdvanceTo)
		}
	case "advance", "idle":
		s := j.Idle
		if ctl.Kind == "advance" {
			s = j.Advance
		}
		if ctl.Duration, err = time.ParseDuration(*s); err != nil || ctl.Duration <= 0 {
			return Case{}, fmt.Errorf("%s: %q: want a positive duration (\"30s\", \"5m\")", ctl.Kind, *s)
		}
	case "state":
		if ctl.Put, err = entries("state.put", j.State.Put, entryPut); err == nil {
			ctl.Delete, err = entries("state.delete", j.State.Delete, entryDelete)
		}
		if err == nil {
			ctl.Timers, err = timers("state.timers", j.State.Timers)
		}
		if err == nil && len(ctl.Put)+len(ctl.Delete)+len(ctl.Timers) == 0 {
			err = errors.New("state: want \"put\", \"delete\" or \"timers\" entries")
		}
	case "expect_state":
		ctl.ExpectState, err = j.ExpectState.expect()
	}
	if err != nil {
		return Case{}, err
	}
	if j.Expect != nil {
		if ctl.Kind != "advance_to" && ctl.Kind != "advance" && ctl.Kind != "idle" {
			return Case{}, fmt.Errorf("expect: a %s line fires no timers (expect goes with advance_to, advance or idle; expect_state checks the state)", ctl.Kind)
		}
		if c.Expect, err = j.Expect.expect(); err != nil {
			return Case{}, err
		}
	}
	return c, nil
}

func controlList() string { return "advance_to, advance, idle, state, expect_state" }

// What an entry is: a put (with a value), a delete (only a key) or a
// check (a value, absent, or neither: set to any value).
const (
	entryPut = iota
	entryDelete
	entryGet
)

// entries reads state's put or delete entries, or expect_state's get.
func entries(field string, js []entryJSON, what int) ([]StateEntry, error) {
	var out []StateEntry
	for i := range js {
		e, err := js[i].entry(fmt.Sprintf("%s[%d]", field, i), what)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// entry is one state entry of kind what.
func (j *entryJSON) entry(field string, what int) (StateEntry, error) {
	var e StateEntry
	var err error
	if e.Key, err = bytesField(field+".key", j.Key, j.KeyBase64); err != nil {
		return e, err
	}
	if e.Key == nil {
		return e, fmt.Errorf("%s.key: want a key (text, JSON or key_base64)", field)
	}
	if e.Two = len(j.Sub) > 0 || j.SubBase64 != nil; e.Two {
		if e.Sub, err = bytesField(field+".sub", j.Sub, j.SubBase64); err != nil {
			return e, err
		}
		if e.Sub == nil {
			e.Sub = []byte{}
		}
	}
	hasValue := len(j.Value) > 0 || j.ValueBase64 != nil
	switch {
	case j.ValueBase64 != nil:
		b, err := bytesField(field+".value", j.Value, j.ValueBase64)
		if err != nil {
			return e, err
		}
		e.Value = jsonBytes{b: b}
	case hasValue:
		if e.Value, err = textOrJSON(field+".value", j.Value); err != nil {
			return e, err
		}
	}
	switch {
	case what == entryPut && (!hasValue || e.Value.b == nil || j.Absent):
		return e, fmt.Errorf("%s.value: want a value (a put; a delete goes in state.delete)", field)
	case what == entryDelete && (hasValue || j.Absent):
		return e, fmt.Errorf("%s: a delete has only key and sub", field)
	case hasValue && j.Absent:
		return e, fmt.Errorf("%s: value and absent: give one", field)
	}
	e.Absent = j.Absent || (hasValue && e.Value.b == nil)
	e.Any = !hasValue && !j.Absent
	return e, nil
}

// expect is expect_state's check.
func (j *expectStJSON) expect() (*ExpectState, error) {
	e := &ExpectState{}
	var err error
	if e.Get, err = entries("expect_state.get", j.Get, entryGet); err != nil {
		return nil, err
	}
	if j.Timers != nil {
		e.HasTimers = true
		if e.Timers, err = timers("expect_state.timers", *j.Timers); err != nil {
			return nil, err
		}
	}
	if len(e.Get) == 0 && !e.HasTimers {
		return nil, errors.New("expect_state: want \"get\" or \"timers\"")
	}
	return e, nil
}

// timers reads a list of timers (key, at).
func timers(field string, js []timerJSON) ([]TimerAt, error) {
	out := []TimerAt{}
	for i, t := range js {
		k, err := bytesField(fmt.Sprintf("%s[%d].key", field, i), t.Key, t.KeyBase64)
		if err != nil {
			return nil, err
		}
		if k == nil {
			return nil, fmt.Errorf("%s[%d].key: want a key (text, JSON or key_base64)", field, i)
		}
		out = append(out, TimerAt{Key: k, At: t.At})
	}
	return out, nil
}

// Check compares the state with e: get reads a key (ok false: not set),
// timers are every timer set. It returns a line for each difference
// ("state \"k\"/\"w\": got \"3\", want \"4\"", field by field for JSON).
func (e *ExpectState) Check(get func(*StateEntry) ([]byte, bool, error), timers []TimerAt) []string {
	var diff []string
	for i := range e.Get {
		x := &e.Get[i]
		v, ok, err := get(x)
		name := "state " + x.Name()
		switch {
		case err != nil:
			diff = append(diff, fmt.Sprintf("%s: %v", name, err))
		case x.Absent && ok:
			diff = append(diff, fmt.Sprintf("%s: got %s, want absent", name, quoteBytes(v)))
		case !x.Absent && !ok:
			diff = append(diff, fmt.Sprintf("%s: absent, want %s", name, wantText(x)))
		case ok && !x.Any:
			diff = append(diff, x.Value.differs(name, v)...)
		}
	}
	if e.HasTimers && !timersEqual(timers, e.Timers) {
		diff = append(diff, fmt.Sprintf("timers: got %s, want %s", timersText(timers), timersText(e.Timers)))
	}
	return diff
}

func wantText(x *StateEntry) string {
	if x.Any {
		return "set"
	}
	return x.Value.String()
}

func timersEqual(a, b []TimerAt) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].At != b[i].At || !bytes.Equal(a[i].Key, b[i].Key) {
			return false
		}
	}
	return true
}

func timersText(ts []TimerAt) string {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, t := range ts {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%s, %d)", strconv.Quote(string(t.Key)), t.At)
	}
	b.WriteByte(']')
	return b.String()
}

// RecordsOnly refuses a vectors file with control lines, for a reader
// that runs records only (`wasmstream conformance --vectors`): its error
// names file's first control line.
func RecordsOnly(file string, cases []Case) error {
	for i := range cases {
		if c := cases[i].Control; c != nil {
			return fmt.Errorf("%s:%d: %s: a control line (%s) runs in `wasmstream test`, which keeps a stream time and state; conformance runs records only", file, cases[i].Line, c.Kind, controlList())
		}
	}
	return nil
}
