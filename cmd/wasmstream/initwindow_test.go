package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// init --template window, in Go and in Rust: the project created, built
// with its Makefile and its make test run (the unit test closing windows
// over the SDK's in-memory partition, wasmstream test on vectors.jsonl —
// whose windows close as wasmstream test fires their timers — and the ABI
// checks) and make conformance (whose kit fires them too); then the module
// itself run in the host on records with timestamps, the windows' timers
// fired with Instance.ProcessTimer by the firing rule of ABI.md §4.2
// (windowPartition): the counts come out once stream time passes a
// window's end plus its grace, a record within the grace still counts, a
// late one does not, and the closed windows leave no state and no timers.
// The project's make runs the wasmstream command of this source, built
// here.
func TestInitWindowTemplate(t *testing.T) {
	t.Parallel()
	k := newTemplateKit(t, "window")
	e, err := host.NewEngine("", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) }) // after the parallel subtests
	for _, lang := range []string{"go", "rust"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "clicks")
			out := k.initAndTest(t, lang, dir, "template window")
			cfg, err := os.ReadFile(filepath.Join(dir, "config.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"ordering: partition", "enabled: true"} {
				if !bytes.Contains(cfg, []byte(want)) {
					t.Errorf("config.yaml lacks %q:\n%s", want, cfg)
				}
			}
			unit := map[string]string{"go": "ok  \tclicks", "rust": "test result: ok. 1 passed"}[lang]
			if !strings.Contains(out, unit) || !strings.Contains(out, "8 record(s): 2 ok, 6 dropped, 0 retry, 0 fail; expectations: 8 passed, 0 failed") || !abiAllPassed(out) {
				t.Fatalf("make test:\n%s", out)
			}
			// The conformance kit fires the timers too: the vectors pass there.
			out = k.make(t, dir, "conformance")
			if !strings.Contains(out, "(line 16) (ok with 2 output(s))") || !strings.Contains(out, "(line 18) (ok with 2 output(s))") {
				t.Fatalf("make conformance:\n%s", out)
			}
			wasm, err := os.ReadFile(filepath.Join(dir, "clicks.wasm"))
			if err != nil {
				t.Fatal(err)
			}
			windowsInTheHost(t, e, wasm)
		})
	}
	k.refusesLang(t, "c", "C")
}

// windowsInTheHost runs the window template's module on a partition's
// records in the host, firing its timers, and checks the final counts.
func windowsInTheHost(t *testing.T, e *host.Engine, wasm []byte) {
	t.Helper()
	ctx := context.Background()
	m, err := e.Load(ctx, wasm, host.ModuleConfig{Name: "clicks"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	if !m.Info().Timers {
		t.Fatal("the module is not noted as having timers")
	}
	in, err := m.NewInstance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := newWindowPartition(in)
	const nine = 1767258000000 // 2026-01-01 09:00 UTC
	for i, r := range []struct {
		key  string
		secs int64
	}{
		{"ann", 5}, {"bob", 30}, {"ann", 59}, {"ann", 60}, // 60: the next minute's
		{"bob", 1},  // out of order, within the grace
		{"bob", 70}, // stream time 09:01:10 = 09:00's end + grace: it closes
		{"ann", 20}, // late: 09:00 has closed
	} {
		if err := p.record(ctx, &abi.Record{Topic: "in", Offset: int64(i), Timestamp: nine + r.secs*1000, Attempt: 1, Key: []byte(r.key), Value: []byte("click")}); err != nil {
			t.Fatalf("record %d %+v: %v", i, r, err)
		}
	}
	if err := p.advance(ctx, nine+130_000); err != nil { // timers.idle_advance: the 09:01 windows close
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf(`ann {"start":%d,"end":%d,"count":2}`, nine, nine+60000),
		fmt.Sprintf(`bob {"start":%d,"end":%d,"count":2}`, nine, nine+60000),
		fmt.Sprintf(`ann {"start":%d,"end":%d,"count":1}`, nine+60000, nine+120000),
		fmt.Sprintf(`bob {"start":%d,"end":%d,"count":1}`, nine+60000, nine+120000),
	}
	if fmt.Sprint(p.outputs) != fmt.Sprint(want) {
		t.Fatalf("the windows' results\n got %v\nwant %v", p.outputs, want)
	}
	if len(p.state2) != 0 || len(p.timers) != 0 || p.firings != 4 {
		t.Fatalf("after the windows closed: state %q, timers %v, %d firings (want none, none, 4)", p.state2, p.timers, p.firings)
	}
}

// windowPartition is one partition's two-part state, timers and stream
// time in memory, driving an instance by ABI.md §4.2's firing rule: when a
// record succeeds, stream time becomes the larger of itself and the
// record's timestamp, then each timer at or before it fires, in (at, key)
// order, each firing's writes kept when it succeeds.
type windowPartition struct {
	in      *host.Instance
	topic   string // the last record's: the firings'
	part    int32
	state2  map[string][]byte // key 0 sub
	timers  map[timerName]bool
	st      int64
	firings int
	outputs []string // "key value" of each output, in order
}

type timerName struct {
	at  int64
	key string
}

func newWindowPartition(in *host.Instance) *windowPartition {
	return &windowPartition{in: in, state2: map[string][]byte{}, timers: map[timerName]bool{}, st: -1}
}

func (p *windowPartition) record(ctx context.Context, r *abi.Record) error {
	p.topic, p.part = r.Topic, r.Partition
	c := p.call()
	res := p.in.ProcessState(ctx, r, nil, c)
	if err := p.end(c, res); err != nil {
		return err
	}
	return p.advance(ctx, r.Timestamp)
}

// advance moves stream time to t (if later) and fires what is due.
func (p *windowPartition) advance(ctx context.Context, t int64) error {
	p.st = max(p.st, t)
	for {
		var due []timerName
		for tm := range p.timers {
			if tm.at <= p.st {
				due = append(due, tm)
			}
		}
		if len(due) == 0 {
			return nil
		}
		sort.Slice(due, func(i, j int) bool {
			return due[i].at < due[j].at || due[i].at == due[j].at && due[i].key < due[j].key
		})
		tm := due[0]
		delete(p.timers, tm)
		p.firings++
		c := p.call()
		res := p.in.ProcessTimer(ctx, &abi.TimerFiring{At: tm.at, StreamTime: p.st, Partition: p.part, Attempt: 1, Topic: p.topic, Key: []byte(tm.key)}, nil, c)
		if err := p.end(c, res); err != nil {
			return fmt.Errorf("timer (%q, %d): %w", tm.key, tm.at, err)
		}
	}
}

func (p *windowPartition) call() *windowCall {
	return &windowCall{p: p, state2: map[string][]byte{}, deleted: map[string]bool{}, timers: map[timerName]bool{}}
}

// end keeps a succeeded call's writes and outputs.
func (p *windowPartition) end(c *windowCall, res host.Result) error {
	if res.Status != abi.StatusOK {
		return fmt.Errorf("status %v: %v", res.Status, res.Err)
	}
	for k := range c.deleted {
		delete(p.state2, k)
	}
	for k, v := range c.state2 {
		p.state2[k] = v
	}
	for tm, set := range c.timers {
		if set {
			p.timers[tm] = true
		} else {
			delete(p.timers, tm)
		}
	}
	for _, o := range res.Outputs {
		p.outputs = append(p.outputs, string(o.Key)+" "+string(o.Value))
	}
	return nil
}

// windowCall is the host.State of one call: its writes over the
// partition's. It serves the two-part keys, stream time and timers
// (host.State2, host.Timers); the one-part keys are empty.
type windowCall struct {
	p       *windowPartition
	state2  map[string][]byte
	deleted map[string]bool
	timers  map[timerName]bool // false: deleted
}

func (c *windowCall) Get([]byte) ([]byte, abi.Errno)                       { return nil, abi.ErrnoNotFound }
func (c *windowCall) Put(_, _ []byte) abi.Errno                            { return abi.ErrnoNotSupported }
func (c *windowCall) Delete([]byte) abi.Errno                              { return abi.ErrnoNotSupported }
func (c *windowCall) Written([]byte) (int, bool)                           { return 0, false }
func (c *windowCall) Reader() host.StateReader                             { return nil }
func (c *windowCall) StreamTime() (int64, abi.Errno)                       { return c.p.st, 0 }
func (c *windowCall) Scan(_, _ []byte, _ func(k, v []byte) bool) abi.Errno { return 0 }

func name2(key, sub []byte) string { return string(key) + "\x00" + string(sub) }

func (c *windowCall) Get2(key, sub []byte) ([]byte, abi.Errno) {
	k := name2(key, sub)
	if v, ok := c.state2[k]; ok {
		return v, 0
	}
	if v, ok := c.p.state2[k]; ok && !c.deleted[k] {
		return v, 0
	}
	return nil, abi.ErrnoNotFound
}

func (c *windowCall) Put2(key, sub, value []byte) abi.Errno {
	k := name2(key, sub)
	c.state2[k] = bytes.Clone(value)
	delete(c.deleted, k)
	return 0
}

func (c *windowCall) Delete2(key, sub []byte) abi.Errno {
	k := name2(key, sub)
	delete(c.state2, k)
	c.deleted[k] = true
	return 0
}

func (c *windowCall) Written2(key, sub []byte) (int, bool) {
	k := name2(key, sub)
	v, ok := c.state2[k]
	return len(v), ok || c.deleted[k]
}

func (c *windowCall) Scan2(key, prefix, after []byte, fn func(sub, value []byte) bool) abi.Errno {
	var subs []string
	seen := map[string]bool{}
	for _, m := range []map[string][]byte{c.state2, c.p.state2} {
		for k := range m {
			sub, ok := strings.CutPrefix(k, string(key)+"\x00")
			if ok && !seen[sub] && strings.HasPrefix(sub, string(prefix)) && (len(after) == 0 || sub > string(after)) {
				seen[sub] = true
				subs = append(subs, sub)
			}
		}
	}
	sort.Strings(subs)
	for _, sub := range subs {
		if v, e := c.Get2(key, []byte(sub)); e == 0 && !fn([]byte(sub), v) {
			break
		}
	}
	return 0
}

func (c *windowCall) SetTimer(key []byte, at int64) abi.Errno {
	c.timers[timerName{at, string(key)}] = true
	return 0
}

func (c *windowCall) DeleteTimer(key []byte, at int64) abi.Errno {
	c.timers[timerName{at, string(key)}] = false
	return 0
}

func (c *windowCall) WrittenTimer(key []byte, at int64) bool {
	_, ok := c.timers[timerName{at, string(key)}]
	return ok
}

// The C and AssemblyScript sketches of docs/SDK.md ("Windows and
// timers"), over the raw event-time bindings of their SDKs
// (abi/sdk/c/wasmstream.h, abi/sdk/assemblyscript/assembly/host.ts): in
// the host, firing their timers, they count as the templates' windows do.
func TestRawWindowGuests(t *testing.T) {
	t.Parallel()
	e, err := host.NewEngine("", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) }) // after the parallel subtests
	wt.InstallASSDK(t)
	for _, g := range []struct {
		name  string
		build func(testing.TB, string) []byte
		src   string
	}{
		{"c", wt.BuildCGuest, "plugins/examples/c-window/window.c"},
		{"assemblyscript", wt.BuildASGuest, "plugins/examples/as-window/assembly/index.ts"},
	} {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			windowsInTheHost(t, e, g.build(t, g.src))
		})
	}
}

// The Go SDK's timer entry in the host (testdata/timerguest): a firing
// reaches the function registered with guest.ProcessTimers with every
// field of its encoding, and the firing's handle (guest.Handle) serves the
// state calls; a terminal error fails it, another retries it, a firing that
// waits fails terminally rather than going pending (a protocol fault), and
// without a timer function a firing fails naming ProcessTimers.
func TestGoTimerEntry(t *testing.T) {
	t.Parallel()
	wasm := wt.BuildGoGuest(t, "cmd/wasmstream/testdata/timerguest")
	e, err := host.NewEngine("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	ctx := context.Background()
	m, err := e.Load(ctx, wasm, host.ModuleConfig{Name: "timerguest"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	in, err := m.NewInstance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := newWindowPartition(in)
	p.st = 41
	if err := p.record(ctx, &abi.Record{Topic: "clicks", Partition: 2, Timestamp: 40, Attempt: 1, Key: []byte("k")}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"k at 40 stream_time 41/41 partition 2 attempt 1 topic clicks"}; fmt.Sprint(p.outputs) != fmt.Sprint(want) {
		t.Fatalf("the firing the guest saw: %q, want %q", p.outputs, want)
	}
	for _, c := range []struct {
		key    string
		status abi.Status
		msg    string
	}{
		{"fail", abi.StatusFail, "the firing failed"},
		{"retry", abi.StatusRetry, "asks for a retry"},
		{"wait", abi.StatusFail, "cannot wait on asynchronous operations"},
	} {
		res := in.ProcessTimer(ctx, &abi.TimerFiring{At: 1, StreamTime: 1, Attempt: 1, Topic: "in", Key: []byte(c.key)}, nil, p.call())
		if res.Status != c.status || res.Err == nil || !strings.Contains(res.Err.Error(), c.msg) || res.Fault() != nil {
			t.Errorf("firing %q: %v %v, want %v naming %q", c.key, res.Status, res.Err, c.status, c.msg)
		}
	}
	if res := in.ProcessState(ctx, &abi.Record{Topic: "in", Attempt: 1, Key: []byte("unregister")}, nil, p.call()); res.Status != abi.StatusOK {
		t.Fatal(res.Err)
	}
	res := in.ProcessTimer(ctx, &abi.TimerFiring{At: 1, Key: []byte("k")}, nil, p.call())
	if res.Status != abi.StatusFail || res.Err == nil || !strings.Contains(res.Err.Error(), "ProcessTimers") {
		t.Fatalf("a firing without a timer function: %v %v", res.Status, res.Err)
	}
}
