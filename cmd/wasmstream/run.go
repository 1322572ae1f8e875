package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/internal/termsafe"
	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/assembly"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, ",") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

type commonFlags struct {
	config  string
	brokers string
	sets    setFlags
	// compileConfig: run --compile-config-module (assembly.Options).
	compileConfig bool
}

func (c *commonFlags) register(fs *flag.FlagSet, defConfig string) {
	fs.StringVar(&c.config, "config", defConfig, "config file (YAML)")
	fs.StringVar(&c.brokers, "brokers", "", "broker addresses, comma-separated, or 'embedded' (overrides kafka.brokers)")
	fs.Var(&c.sets, "set", "override a config key, key=value (repeatable), e.g. --set kafka.group=g1")
}

func (c *commonFlags) load(extra ...string) (*config.Config, error) {
	sets := append([]string{}, c.sets...)
	if c.brokers != "" {
		sets = append(sets, "kafka.brokers="+c.brokers)
	}
	sets = append(sets, extra...)
	return config.Load(c.config, os.Environ(), sets)
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(cfg.Log.Level))
	opts := &slog.HandlerOptions{Level: lv}
	if cfg.Log.Format == "json" {
		// The JSON handler escapes C0 controls but writes C1 controls and
		// bidirectional overrides raw, and a guest's log message or an
		// error quoting a module's names may hold them: termsafe.JSON
		// writes them as \u escapes, the same JSON value.
		return slog.New(slog.NewJSONHandler(termsafe.JSONWriter(w), opts))
	}
	// The text handler quotes any value with a character that is not
	// printable (strconv.Quote): nothing reaches the terminal raw.
	return slog.New(slog.NewTextHandler(w, opts))
}

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf commonFlags
	cf.register(fs, config.DefaultFile)
	fs.BoolVar(&cf.compileConfig, "compile-config-module", false, "compile each pipeline's config module even when a deployed version (admin API or fleet registry) replaces it, and fail if it does not load")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: wasmstream run [--config config.yaml] [--brokers a:9092,b:9092] [--set key=value]...\n\nRuns every pipeline of the config until SIGINT/SIGTERM, then stops fetching,\nlets in-flight records finish (shutdown.drain_timeout), commits and leaves the group.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	h, code := startHost(&cf, stderr)
	if h == nil {
		return code
	}
	defer h.release()
	cfg, log, ctx, r := h.cfg, h.log, h.ctx, h.r
	log.Info("wasmstream running", "version", version, "pipelines", len(cfg.Pipelines), "brokers", strings.Join(r.Brokers(), ","))
	fmt.Fprint(stdout, banner(cfg, r.Brokers(), h.host.DashboardURL(), h.host.AdminURL(), h.host.Overrides()))
	st := newStatus(r)
	tick := time.NewTicker(cfg.Status.Interval)
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-r.Failed():
			log.Error("stopping: a pipeline cannot go on", "err", err)
			h.shutdown()
			return 1
		case now := <-tick.C:
			st.log(log, st.lines(), now)
		}
	}
	if !h.shutdown() {
		log.Error("shutdown did not finish in time; uncommitted records will be processed again on restart")
		return 1
	}
	for _, s := range r.Snapshots() {
		log.Info("stopped", "pipeline", s.Name, "done", s.Done, "outputs", s.Outputs, "dropped", s.Dropped, "retried", s.Retried, "dead_lettered", s.DeadLetter, "faults", s.Faults, "restarted", s.Restarted, "skipped", s.Skipped, "transactions", s.TxnCommitted, "aborted", s.TxnAborted)
	}
	return 0
}

// status turns snapshots into per-pipeline rates.
type status struct {
	r    *scheduler.Runner
	last map[string]scheduler.Snapshot
	at   time.Time
	// logged is each pipeline's last line logged, and when: an idle
	// pipeline's line is not repeated every status.interval (an idle
	// pipeline and its retry tier made two lines every 10 s), only every
	// idleStatusEvery.
	logged map[string]loggedLine
}

type loggedLine struct {
	l  statusLine
	at time.Time
}

// idleStatusEvery is how often an idle pipeline's unchanged line is
// logged again: the log still shows the host alive.
const idleStatusEvery = 10 * time.Minute

// log logs each line, except a pipeline's that says what its last one
// said while it is idle (within idleStatusEvery of it).
func (s *status) log(log *slog.Logger, lines []statusLine, now time.Time) {
	if s.logged == nil {
		s.logged = map[string]loggedLine{}
	}
	for _, l := range lines {
		if prev, ok := s.logged[l.Name]; ok && l.idle() && prev.l.idle() && sameCounts(prev.l, l) && now.Sub(prev.at) < idleStatusEvery {
			continue
		}
		s.logged[l.Name] = loggedLine{l, now}
		log.Info("status", l.attrs()...)
	}
}

// idle: nothing in flight, moving or wrong.
func (l statusLine) idle() bool {
	return l.rate == 0 && l.InFlight == 0 && l.Queued == 0 && l.brokerErrs == "" && len(l.Stalled) == 0
}

// sameCounts: b says what a said (the counters and gauges a line shows).
func sameCounts(a, b statusLine) bool {
	x, y := a.Snapshot, b.Snapshot
	return x.Done == y.Done && x.Lag == y.Lag && x.Dropped == y.Dropped && x.Retried == y.Retried && x.DeadLetter == y.DeadLetter &&
		x.Faults == y.Faults && x.Tasks == y.Tasks && x.Instances == y.Instances && x.Busy == y.Busy && x.Paused == y.Paused &&
		x.Skipped == y.Skipped && x.TxnCommitted == y.TxnCommitted && x.TxnAborted == y.TxnAborted && x.TargetInstances == y.TargetInstances &&
		x.AsyncLimit == y.AsyncLimit && x.Released == y.Released && x.Borrowed == y.Borrowed
}

type statusLine struct {
	scheduler.Snapshot
	rate float64
	// brokerErrs are the broker errors since the previous line, "" for
	// none: "<broker>: <n> (<last error>)", brokers joined by "; ".
	brokerErrs string
}

func (l statusLine) attrs() []any {
	a := []any{"pipeline", l.Name, "records_per_s", fmt.Sprintf("%.0f", l.rate), "in_flight", l.InFlight, "lag", l.Lag,
		"done", l.Done, "dropped", l.Dropped, "retried", l.Retried, "dead_lettered", l.DeadLetter, "faults", l.Faults, "partitions", l.Tasks,
		"instances", l.Instances, "busy", l.Busy, "borrowed", l.Borrowed, "released", l.Released, "paused", l.Paused, "skipped", l.Skipped, "transactions", l.TxnCommitted, "aborted", l.TxnAborted}
	if l.PoolReason != "" { // instances: auto
		a = append(a, "target_instances", l.TargetInstances, "pool_reason", l.PoolReason)
	}
	if l.AsyncReason != "" { // async.max_in_flight: auto
		a = append(a, "async_limit", l.AsyncLimit, "async_reason", l.AsyncReason)
	}
	// A sick broker shows as its errors and partitions stalled fetching or
	// producing; a sick module as partitions stalled processing.
	if l.brokerErrs != "" {
		a = append(a, "broker_errors", l.brokerErrs)
	}
	if st := stalledText(l.Stalled); st != "" {
		a = append(a, "stalled", st)
	}
	return a
}

// stalledText is "<topic>/<partition> <reason> <for>", joined by ", ".
func stalledText(ss []scheduler.StalledPartition) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = fmt.Sprintf("%s/%d %s %s", s.Topic, s.Partition, s.Reason, s.For.Round(time.Second))
	}
	return strings.Join(parts, ", ")
}

// brokerErrorsSince is what errors cur adds to prev, per broker.
func brokerErrorsSince(prev, cur []scheduler.BrokerErrors) string {
	before := map[string]int64{}
	for _, b := range prev {
		before[b.Broker] = b.Connect + b.Request
	}
	var parts []string
	for _, b := range cur {
		if n := b.Connect + b.Request - before[b.Broker]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d (%s)", b.Broker, n, b.LastError))
		}
	}
	return strings.Join(parts, "; ")
}

func (l statusLine) String() string {
	s := fmt.Sprintf("[%s] %.0f rec/s · in flight %d · lag %d · done %d · dropped %d · retried %d · dead-lettered %d · guest faults %d · partitions %d · instances %d (%d busy)",
		l.Name, l.rate, l.InFlight, l.Lag, l.Done, l.Dropped, l.Retried, l.DeadLetter, l.Faults, l.Tasks, l.Instances, l.Busy)
	if l.PoolReason != "" {
		s += fmt.Sprintf(" · auto target %d (%s)", l.TargetInstances, l.PoolReason)
	}
	if l.AsyncReason != "" {
		s += fmt.Sprintf(" · async limit %d per instance (%s)", l.AsyncLimit, l.AsyncReason)
	}
	if l.brokerErrs != "" {
		s += " · broker errors " + l.brokerErrs
	}
	if st := stalledText(l.Stalled); st != "" {
		s += " · stalled " + st
	}
	return s
}

func newStatus(r *scheduler.Runner) *status {
	return &status{r: r, last: map[string]scheduler.Snapshot{}, at: time.Now()}
}

func (s *status) lines() []statusLine {
	now := time.Now()
	dt := now.Sub(s.at).Seconds()
	s.at = now
	var out []statusLine
	for _, snap := range s.r.Snapshots() {
		prev := s.last[snap.Name]
		rate := 0.0
		if dt > 0 {
			rate = float64(snap.Done-prev.Done) / dt
		}
		s.last[snap.Name] = snap
		out = append(out, statusLine{Snapshot: snap, rate: rate, brokerErrs: brokerErrorsSince(prev.BrokerErrors, snap.BrokerErrors)})
	}
	return out
}

func cmdVersion(stdout io.Writer) int {
	fmt.Fprintf(stdout, "wasmstream %s (ABI v%d, host module %s)\n", version, abi.Version, abi.HostModule)
	return 0
}

// hostProc is the started process with its config, logger and signal
// context.
type hostProc struct {
	cfg  *config.Config
	log  *slog.Logger
	ctx  context.Context // ends on SIGINT/SIGTERM, or stop
	sig  *signals
	host *assembly.Host
	r    *scheduler.Runner
}

// stop ends ctx; a signal after it still ends the process at once.
func (h *hostProc) stop() { h.sig.cancel() }

// startHost loads the config, starts the process and returns it, or nil and
// the exit code after printing why it could not.
// The signal handler is installed first, before the config is read: a
// signal while the process starts ends the start, and the process exits
// cleanly (status 0) having stopped what it started.
func startHost(cf *commonFlags, stderr io.Writer) (*hostProc, int) {
	sig := catchSignals(stderr)
	cfg, err := cf.load()
	if err != nil {
		sig.release()
		printErr(stderr, "wasmstream", err)
		return nil, 1
	}
	log := newLogger(cfg, stderr)
	host, err := assembly.StartWith(sig.ctx, cfg, log, assembly.Options{CompileConfigModules: cf.compileConfig})
	if err != nil {
		signalled := sig.ctx.Err() != nil // before release, which ends ctx
		sig.release()
		if signalled {
			log.Info("stopped by a signal while starting", "err", err)
			return nil, 0
		}
		printErr(stderr, "wasmstream", err)
		return nil, 1
	}
	return &hostProc{cfg: cfg, log: log, ctx: sig.ctx, sig: sig, host: host, r: host.Runner()}, 0
}

// shutdown stops the process in stages (assembly.Host.Shutdown) and
// reports whether it finished in time: it returns within
// shutdown.drain_timeout plus assembly.ShutdownMargin whatever the brokers
// do. A second signal during it ends the process at once (signals).
func (h *hostProc) shutdown() bool {
	h.stop()
	return h.host.Shutdown()
}

// release stops watching signals, once the process has shut down.
func (h *hostProc) release() { h.sig.release() }

// banner is what `run` prints once started: the pipelines (and which of
// them run a deployed version instead of the config's module, loudly), the
// brokers, the dashboard's URL and the admin API's address.
func banner(cfg *config.Config, brokers []string, dashboardURL, adminURL string, overrides []assembly.Override) string {
	var b strings.Builder
	over := map[string]assembly.Override{}
	for _, o := range overrides {
		over[o.Pipeline] = o
	}
	fmt.Fprintf(&b, "wasmstream %s running %d pipeline(s)\n", version, len(cfg.Pipelines))
	for i := range cfg.Pipelines {
		pc := &cfg.Pipelines[i]
		fmt.Fprintf(&b, "  %-20s %s -> %s\n", termsafe.Line(pc.Name), termsafe.Line(strings.Join(pc.Inputs, ",")), termsafe.Line(pc.Output))
	}
	fmt.Fprintf(&b, "  brokers     %s\n", termsafe.Line(strings.Join(brokers, ",")))
	if dashboardURL != "" {
		fmt.Fprintf(&b, "  dashboard   %s   (and /metrics, /status, /healthz, /readyz)\n", dashboardURL)
	} else {
		fmt.Fprintf(&b, "  dashboard   off (metrics.listen is empty)\n")
	}
	if adminURL != "" {
		fmt.Fprintf(&b, "  admin API   %s   (wasmstream deploy, processors)\n", adminURL)
	} else {
		fmt.Fprintf(&b, "  admin API   off (admin.enabled: false)\n")
	}
	for _, o := range overrides {
		label := ""
		if o.Label != "" {
			label = " (" + termsafe.Line(o.Label) + ")"
		}
		cfgDigest := "unreadable"
		if o.ConfigDigest != "" {
			cfgDigest = o.ConfigDigest[:min(12, len(o.ConfigDigest))]
		}
		fmt.Fprintf(&b, "  !! CONFIG OVERRIDDEN: pipeline %s runs %s%s from %s,\n     NOT the config's module %s (%s). Deploy the config's module to run it (wasmstream deploy).\n",
			termsafe.Line(o.Pipeline), o.Digest[:min(12, len(o.Digest))], label, termsafe.Line(o.From), termsafe.Line(o.ConfigModule), cfgDigest)
	}
	return b.String()
}
