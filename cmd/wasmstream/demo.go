package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/kafkaconn"
	"github.com/wasmstream/wasmstream/internal/termsafe"
	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/admin"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

var demoUsers = []string{"ada", "grace", "linus", "barbara", "ken", "margaret"}

// demoFaults: every seventh demo record asks the enrich example to misbehave,
// to show a fault contained and dead-lettered while the line keeps moving.
var demoFaults = []string{"fail", "panic", "loop", "oom"}

func demoValue(n int) string {
	if n%7 == 6 {
		return fmt.Sprintf(`{"n":%d,"user":%q,"text":"please misbehave","fault":%q}`, n, demoUsers[n%len(demoUsers)], demoFaults[(n/7)%len(demoFaults)])
	}
	return fmt.Sprintf(`{"n":%d,"user":%q,"text":"hello from wasmstream"}`, n, demoUsers[n%len(demoUsers)])
}

// demoCmd is `wasmstream demo`'s flags and, once the host runs, the topics
// it feeds and tails and the client that does it.
type demoCmd struct {
	cf             commonFlags
	duration       time.Duration
	rate           float64
	input          string
	lookupAddr     string
	portBase       int
	stdout, stderr io.Writer
	lines          [][]byte // --input's lines
	schemas        schemaFlag
	sch            *demoSchemas // schema-registry data; nil: none

	inputs  map[string]bool // the pipelines' input topics
	outputs []string        // their output, dead-letter and retry topics
	cl      *kgo.Client
	out     sync.Mutex // one line at a time on stdout
	seen    demoActivity
}

func cmdDemo(args []string, stdout, stderr io.Writer) int {
	d := &demoCmd{stdout: stdout, stderr: stderr}
	if code := d.parse(args); code >= 0 {
		return code
	}
	if code := d.ports(); code >= 0 {
		return code
	}
	if d.lookupAddr != "" {
		if stop := d.startLookup(); stop != nil {
			defer stop()
		}
	}
	defer func() { d.sch.close() }()
	if code := d.prepare(); code >= 0 {
		return code
	}
	h, code := startHost(&d.cf, stderr)
	if h == nil {
		return code
	}
	defer h.release()
	return d.run(h)
}

// parse reads the flags into d; it returns the exit code when they do not
// parse, else -1.
func (d *demoCmd) parse(args []string) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(d.stderr)
	d.cf.register(fs, config.DefaultFile)
	fs.DurationVar(&d.duration, "duration", 0, "stop after this long (0: run until Ctrl-C)")
	fs.Float64Var(&d.rate, "rate", 2, "demo input records per second, after an initial burst of 20")
	fs.StringVar(&d.input, "input", "", "produce this file's lines (one record each: JSON lines or text; \"-\": standard input) instead of the generated demo records")
	fs.StringVar(&d.lookupAddr, "lookup-service", defaultLookupAddr, "serve the demo user directory that the lookup pipeline calls here (\"\": don't); the pipelines that call "+defaultLookupAddr+" are pointed at it")
	fs.IntVar(&d.portBase, "port-base", 0, "listen on this port and the two after it, for metrics.listen, admin.listen and the demo user directory, in place of the config's (9464, 9465) and 18089 (0: those)")
	fs.Var(&d.schemas, "schema", schemaFlagUsage+"; --input's lines, JSON, are framed with <topic>-value for the topics a pipeline decodes (input_format)")
	fs.Usage = func() {
		fmt.Fprintf(d.stderr, "Usage: wasmstream demo [--config config.yaml] [--input FILE [--schema SUBJECT=FILE]...] [--duration 30s] [--rate 2]\n\nStarts an embedded Kafka broker and the demo user directory (an HTTP service\nthe lookup pipeline calls), runs the config's pipelines, feeds their input\ntopics with demo records (or the lines of --input) and prints what comes out,\nwith a status line every few seconds that counts the records dropped (done\nwithout an output) and dead-lettered. When --duration ends the input, records\nalready in a retry tier are given up to 20s to finish their path. With --input,\nthe demo stops once every pipeline has done every line (and its retries).\n\nSchema-registry data: for a pipeline whose input_format.value is confluent,\neach --input line is JSON, framed with the subject <topic>-value as a\nproducer's serializer would; --schema SUBJECT=FILE serves schema files from a\nregistry in this process in place of schema_registry.url, and outputs framed\nby output_format are printed as their JSON read back:\n\n  wasmstream demo --config config.yaml --input orders.jsonl \\\n    --schema orders-value=order.avsc --schema totals-value=total.avsc\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if d.cf.brokers == "" {
		d.cf.brokers = "embedded"
	}
	return -1
}

// ports moves the demo's listeners to --port-base and points the
// pipelines that call the demo user directory at its address; it returns
// the exit code when the config does not load or --port-base is out of
// range, else -1.
func (d *demoCmd) ports() int {
	if d.portBase == 0 && (d.lookupAddr == defaultLookupAddr || d.lookupAddr == "") {
		return -1
	}
	cfg, err := d.cf.load()
	if err == nil {
		var sets []string
		if sets, d.lookupAddr, err = portSets(cfg, d.portBase, d.lookupAddr, defaultLookupAddr); err == nil {
			d.cf.sets = append(d.cf.sets, sets...)
			_, err = d.cf.load()
		}
	}
	if err != nil {
		printErr(d.stderr, "wasmstream demo", err)
		return 2
	}
	return -1
}

// startLookup serves the demo user directory and returns what stops it,
// or nil, having said so, when it cannot listen: the demo runs on without.
func (d *demoCmd) startLookup() func() {
	stop, err := serveDemoLookup(d.lookupAddr)
	if err != nil {
		fmt.Fprintf(d.stderr, "wasmstream demo: the demo user directory cannot listen on %s (%v); the lookup pipeline's records will fail and be dead-lettered\n", d.lookupAddr, err)
		return nil
	}
	return stop
}

// prepare reads --input and writes the demo's admin token; it returns the
// exit code when either fails, else -1.
func (d *demoCmd) prepare() int {
	if d.input != "" {
		var err error
		if d.lines, err = readInputLines(d.input); err != nil {
			printErr(d.stderr, "wasmstream demo", err)
			return 1
		}
	}
	var err error
	if d.sch, err = d.prepareSchemas(d.lines); err != nil {
		printErr(d.stderr, "wasmstream demo", err)
		return 1
	}
	if d.input == "" && d.sch != nil && len(d.sch.decoders) > 0 {
		fmt.Fprintf(d.stderr, "wasmstream demo: pipeline %s decodes its input values (input_format.value: confluent), and the generated demo records are not framed: they will be dead-lettered (schema.bad_frame); give --input a file of JSON records, one a line, to have them framed\n", termsafe.Line(strings.Join(d.sch.decoders, ", ")))
	}
	if err := demoToken(&d.cf, d.stdout); err != nil {
		printErr(d.stderr, "wasmstream demo", err)
		return 1
	}
	return -1
}

// run feeds the pipelines' inputs and prints what comes out until
// --duration or Ctrl-C, then lets records in retry tiers finish, stops the
// host and prints each pipeline's counts.
func (d *demoCmd) run(h *hostProc) int {
	cfg, hostCtx, r := h.cfg, h.ctx, h.r
	// ctx is the demo's input: --duration (or Ctrl-C) ends it. The tail of
	// outputs runs on hostCtx, so records already in a retry tier can finish
	// their path before the host stops (drainRetries).
	ctx := hostCtx
	if d.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.duration)
		defer cancel()
	}
	// --input ends the demo too, once every pipeline has done every
	// record of it (watchDrained).
	ctx, endInput := context.WithCancel(ctx)
	defer endInput()
	tailCtx, stopTail := context.WithCancel(hostCtx)
	defer stopTail()
	brokers := r.Brokers()
	d.topics(cfg)
	d.banner(h, brokers)
	cl, err := kafkaconn.NewClient(cfg.Kafka, brokers, kgo.ConsumeTopics(d.outputs...), kgo.ProducerLinger(0))
	if err != nil {
		printErr(d.stderr, "wasmstream", err)
		return 1
	}
	d.cl = cl
	var wg sync.WaitGroup
	seeded := make(chan struct{})
	drained := make(chan struct{})
	wg.Add(3)
	go func() {
		defer wg.Done()
		d.seed(ctx)
		close(seeded)
	}()
	go func() {
		defer wg.Done()
		d.tail(tailCtx)
	}()
	go func() {
		defer wg.Done()
		if d.input != "" && d.watchDrained(ctx, r, cfg, seeded) {
			close(drained)
			endInput()
		}
	}()
	d.printStatus(ctx, r)
	select {
	case <-drained:
		d.say("── %s: every record done by every pipeline; stopping (--input drained)\n", termsafe.Line(d.input))
	default:
	}
	if hostCtx.Err() == nil && !isClosed(drained) {
		if n := d.seen.drain(hostCtx, drainQuiet, drainMax); n > 0 {
			d.say("── waited %s for records in retry tiers to finish their path\n", n.Round(100*time.Millisecond))
		}
	}
	stopTail()
	h.stop()
	wg.Wait()
	cl.Close()
	d.say("\nstopping: draining in-flight records and committing...\n")
	h.shutdown()
	d.printCounts(r)
	return 0
}

// watchDrained waits, once seed has produced --input (seeded), until
// every pipeline has done every record of it and of its retry tiers (its
// Done count is its inputs' records plus the records it sent to a retry
// tier, each done once more there), then until the tail has printed what
// they wrote (nothing tailed for tailQuiet, at most tailMax: their
// outcomes are durable, so the tail reads them within milliseconds); it
// reports whether that happened before ctx ended.
func (d *demoCmd) watchDrained(ctx context.Context, r *scheduler.Runner, cfg *config.Config, seeded <-chan struct{}) bool {
	select {
	case <-seeded:
	case <-ctx.Done():
		return false
	}
	if ctx.Err() != nil {
		return false // seed stopped early
	}
	want := map[string]int64{}
	for _, p := range cfg.Pipelines {
		want[p.Name] = int64(len(d.lines) * len(p.Inputs))
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
		if demoDrained(r.Snapshots(), want) {
			break
		}
	}
	for start := time.Now(); time.Since(start) < tailMax && !d.seen.quietFor(tailQuiet); {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

// demoDrained reports whether each pipeline has done want[name] records
// and every record sent to one of its retry tiers, with none in flight. A
// pipeline's retry tiers have a snapshot of their own, <name>.retry: a
// record sent to a tier is done once where it failed and once more where
// it is retried, so the pipeline and its tiers together have done want
// plus the records they retried.
func demoDrained(snaps []scheduler.Snapshot, want map[string]int64) bool {
	done, retried := map[string]int64{}, map[string]int64{}
	for _, s := range snaps {
		if s.InFlight > 0 {
			return false
		}
		name := s.Name
		if _, ok := want[name]; !ok {
			name = strings.TrimSuffix(name, ".retry")
		}
		done[name] += s.Done
		retried[name] += s.Retried
	}
	for name, n := range want {
		if done[name] < n+retried[name] {
			return false
		}
	}
	return true
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// say prints one line on stdout, whole among the goroutines'.
func (d *demoCmd) say(format string, a ...any) {
	d.out.Lock()
	fmt.Fprintf(d.stdout, format, a...)
	d.out.Unlock()
}

// topics collects the pipelines' input topics, which the demo feeds, and
// their output, dead-letter and retry topics, which it tails.
func (d *demoCmd) topics(cfg *config.Config) {
	d.inputs, d.outputs = map[string]bool{}, []string{}
	for _, p := range cfg.Pipelines {
		for _, in := range p.Inputs {
			d.inputs[in] = true
		}
		d.outputs = append(d.outputs, p.Output, p.DeadLetterTopic)
		d.outputs = append(d.outputs, p.RetryTopics()...)
	}
}

// banner says where the broker and the dashboard are and how to stop.
func (d *demoCmd) banner(h *hostProc, brokers []string) {
	fmt.Fprintf(d.stdout, "wasmstream demo: %d pipeline(s) on the embedded broker at %s\n", len(h.cfg.Pipelines), strings.Join(brokers, ","))
	fmt.Fprintf(d.stdout, "  produce your own input with any client, e.g.: kcat -b %s -t %s -P\n", brokers[0], firstKey(d.inputs))
	if u := h.host.DashboardURL(); u != "" {
		fmt.Fprintf(d.stdout, "  live dashboard: %s\n", u)
	}
	fmt.Fprintf(d.stdout, "  Ctrl-C stops: in-flight records finish, offsets are committed.\n\n")
}

// seed produces --input's lines to every input topic, or else a burst of
// 20 demo records and then --rate a second, until ctx ends.
func (d *demoCmd) seed(ctx context.Context) {
	if d.input != "" {
		for i, l := range d.lines {
			for in := range d.inputs {
				rec := &kgo.Record{Topic: in, Value: l}
				note := ""
				if d.sch != nil && d.sch.framed[in] != nil {
					rec.Value, note = d.sch.framed[in][i], fmt.Sprintf("  (framed: schema id %d)", d.sch.ids[in])
				}
				if err := d.cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
					return
				}
				d.say("→ %-16s %s%s\n", in, printable(l), note)
			}
		}
		d.say("── %s: %d record(s) produced\n", termsafe.Line(d.input), len(d.lines))
		return
	}
	n := 0
	produce := func() {
		for in := range d.inputs {
			rec := &kgo.Record{Topic: in, Key: []byte(demoUsers[n%len(demoUsers)]), Value: []byte(demoValue(n))}
			if err := d.cl.ProduceSync(ctx, rec).FirstErr(); err == nil {
				d.say("→ %-16s %s\n", in, rec.Value)
			}
		}
		n++
	}
	for i := 0; i < 20 && ctx.Err() == nil; i++ {
		produce()
	}
	if d.rate <= 0 {
		return
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / d.rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			produce()
		}
	}
}

// tail prints the records of the output, dead-letter and retry topics
// until ctx ends.
func (d *demoCmd) tail(ctx context.Context) {
	for {
		fetches := d.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fetches.EachRecord(d.printRecord)
	}
}

// printRecord prints one tailed record: an output, a retry (when it is due)
// or a dead letter (why).
func (d *demoCmd) printRecord(rec *kgo.Record) {
	d.seen.record(rec)
	if kind := printableHeader(rec, scheduler.HeaderErrorKind); kind != "" {
		msg := printableHeader(rec, scheduler.HeaderError)
		if i := strings.Index(msg, "; guest output:"); i > 0 {
			msg = msg[:i]
		}
		if due := printableHeader(rec, scheduler.HeaderDue); due != "" {
			ms, _ := strconv.ParseInt(due, 10, 64)
			d.say("↻ %-16s %s[%s]@%s attempt %s due in %s after %s: %s\n", rec.Topic, printableHeader(rec, scheduler.HeaderOriginalTopic), printableHeader(rec, scheduler.HeaderOriginalPartition), printableHeader(rec, scheduler.HeaderOriginalOffset),
				printableHeader(rec, scheduler.HeaderAttempt), time.Until(time.UnixMilli(ms)).Round(100*time.Millisecond), kind, msg)
			return
		}
		d.say("✗ %-16s %s[%s]@%s %s: %s\n", rec.Topic, printableHeader(rec, scheduler.HeaderOriginalTopic), printableHeader(rec, scheduler.HeaderOriginalPartition), printableHeader(rec, scheduler.HeaderOriginalOffset), kind, msg)
		return
	}
	d.say("← %-16s %s\n", rec.Topic, d.sch.show(rec.Topic, rec.Value))
}

// printStatus prints the status lines every two seconds until ctx ends.
func (d *demoCmd) printStatus(ctx context.Context, r *scheduler.Runner) {
	st := newStatus(r)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			for _, l := range st.lines() {
				d.say("── %s\n", l)
			}
		}
	}
}

// printCounts prints each pipeline's counts once the host has stopped.
func (d *demoCmd) printCounts(r *scheduler.Runner) {
	for _, s := range r.Snapshots() {
		txn := ""
		if s.TxnCommitted+s.TxnAborted > 0 {
			txn = fmt.Sprintf(" · transactions %d (%d aborted)", s.TxnCommitted, s.TxnAborted)
		}
		d.say("[%s] done %d · outputs %d · dropped (no output) %d · retried %d · dead-lettered %d · guest faults %d%s\n", s.Name, s.Done, s.Outputs, s.Dropped, s.Retried, s.DeadLetter, s.Faults, txn)
	}
}

// How long the demo waits at its end for records in retry tiers: until the
// last retry seen is due and the outputs have been quiet for drainQuiet, at
// most drainMax (a retry tier's backoff in the demo config is seconds).
const (
	drainQuiet = 3 * time.Second
	drainMax   = 20 * time.Second
)

// How long the demo waits, once --input is drained, for the tail to print
// the records written: until nothing was tailed for tailQuiet, at most
// tailMax.
const (
	tailQuiet = 300 * time.Millisecond
	tailMax   = 3 * time.Second
)

// demoActivity is what the demo's tail has seen: when the last record came
// out and when the latest retry it saw is due. The tail goroutine writes it;
// the demo's main goroutine reads it while draining.
type demoActivity struct {
	mu      sync.Mutex
	last    time.Time
	lastDue time.Time // zero: no retry seen
}

func (a *demoActivity) record(rec *kgo.Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last = time.Now()
	if due := printableHeader(rec, scheduler.HeaderDue); due != "" {
		if ms, err := strconv.ParseInt(due, 10, 64); err == nil {
			if t := time.UnixMilli(ms); t.After(a.lastDue) {
				a.lastDue = t
			}
		}
	}
}

// quietFor reports whether nothing was tailed for d.
func (a *demoActivity) quietFor(d time.Duration) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return time.Since(a.last) >= d
}

// drain waits, when a retry was seen, until the latest one is due and nothing
// came out for quiet, at most max; it returns how long it waited.
func (a *demoActivity) drain(ctx context.Context, quiet, max time.Duration) time.Duration {
	a.mu.Lock()
	retrying := !a.lastDue.IsZero()
	a.mu.Unlock()
	if !retrying {
		return 0
	}
	start := time.Now()
	for time.Since(start) < max && ctx.Err() == nil {
		a.mu.Lock()
		done := time.Now().After(a.lastDue) && time.Since(a.last) >= quiet
		a.mu.Unlock()
		if done {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return time.Since(start)
}

func firstKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}

// The bounds of demo --input: it is for trying a processor on a sample.
const (
	maxInputLines     = 100_000
	maxInputLineBytes = 1 << 20
)

// readInputLines reads the records of demo --input: one per line (without
// its line end), empty lines skipped.
func readInputLines(name string) ([][]byte, error) {
	f := os.Stdin
	if name != "-" {
		var err error
		if f, err = os.Open(name); err != nil {
			return nil, fmt.Errorf("--input: %w", err)
		}
		defer f.Close()
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxInputLineBytes)
	var lines [][]byte
	for n := 1; sc.Scan(); n++ {
		l := bytes.TrimSuffix(sc.Bytes(), []byte("\r"))
		if len(l) == 0 {
			continue
		}
		if len(lines) == maxInputLines {
			return nil, fmt.Errorf("--input %s: more than %d records (a sample is enough for the demo; produce more with any Kafka client)", name, maxInputLines)
		}
		lines = append(lines, bytes.Clone(l))
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("a line longer than %d bytes", maxInputLineBytes)
		}
		return nil, fmt.Errorf("--input %s: %w", name, err)
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("--input %s: no records (one per line)", name)
	}
	return lines, nil
}

// serveDemoLookup serves the demo user directory: GET /users/<name> answers
// a small JSON profile after 20-80 ms, like a remote service would; unknown
// names get 404.
func serveDemoLookup(addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	profiles := map[string]string{
		"ada":      `{"name":"Ada Lovelace","team":"analytics"}`,
		"grace":    `{"name":"Grace Hopper","team":"compilers"}`,
		"linus":    `{"name":"Linus Torvalds","team":"kernel"}`,
		"barbara":  `{"name":"Barbara Liskov","team":"languages"}`,
		"ken":      `{"name":"Ken Thompson","team":"systems"}`,
		"margaret": `{"name":"Margaret Hamilton","team":"flight software"}`,
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Duration(20+rand.IntN(60)) * time.Millisecond)
		p, ok := profiles[strings.TrimPrefix(r.URL.Path, "/users/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, p)
	})}
	go srv.Serve(ln)
	return func() { srv.Close() }, nil
}

// demoToken creates the admin token file the config names, with a random
// token, when the admin API is on, no token is in the environment and the
// file does not exist yet. The token is never printed: the file's path is.
func demoToken(cf *commonFlags, stdout io.Writer) error {
	cfg, err := cf.load()
	if err != nil || !*cfg.Admin.Enabled || cfg.Admin.TokenFile == "" || os.Getenv("WASMSTREAM_ADMIN_TOKEN") != "" {
		return nil // startHost reports config errors
	}
	path := cfg.AdminPath(cfg.Admin.TokenFile)
	if err := admin.CreateTokenFile(path); errors.Is(err, os.ErrExist) {
		return nil
	} else if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "admin API token created in %s (mode 0600)\n", path)
	return nil
}
