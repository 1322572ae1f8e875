package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

const dlqUsage = `Usage:
  wasmstream dlq list    [--config F] [--pipeline NAME] [filters]
  wasmstream dlq show    [--config F] [--pipeline NAME] PARTITION@OFFSET
  wasmstream dlq redrive [--config F] [--pipeline NAME] [--to input|retry] [--dry-run] [filters]

Inspects a pipeline's dead-letter topic: each record with where it came from,
how many attempts it had and every attempt's error; and sends records back —
to the input topic they came from (attempt 1 again), or to the first retry
tier (processed by the retry workers, attempt 2). A redriven record keeps its
key, value and own headers (its trace context included) and is marked with
wasmstream.redriven.from. Redrive is not idempotent: running it twice sends
records twice; narrow it with filters and check with --dry-run.

Filters:
  --kind KIND     error kind (guest.fail, guest.retry, fault.panic, ...)
  --error TEXT    error message contains TEXT
  --key KEY       record key equals KEY
  --since T       failed at or after T (a duration ago, e.g. 1h, or RFC 3339)
  --until T       failed before T
`

type dlqFlags struct {
	commonFlags
	pipeline string
	kind     string
	errText  string
	key      string
	since    string
	until    string
	to       string
	dryRun   bool
	sinceT   time.Time
	untilT   time.Time
}

func cmdDLQ(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stderr, dlqUsage)
		return 2
	}
	sub := args[0]
	if sub != "list" && sub != "show" && sub != "redrive" {
		fmt.Fprintf(stderr, "wasmstream dlq: unknown subcommand %q\n\n%s", sub, dlqUsage)
		return 2
	}
	fs := flag.NewFlagSet("dlq "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f dlqFlags
	f.register(fs, "config.yaml")
	fs.StringVar(&f.pipeline, "pipeline", "", "pipeline name (default: the config's only pipeline)")
	fs.StringVar(&f.kind, "kind", "", "only records whose error kind is KIND")
	fs.StringVar(&f.errText, "error", "", "only records whose error contains TEXT")
	fs.StringVar(&f.key, "key", "", "only records with this key")
	fs.StringVar(&f.since, "since", "", "only records that failed at or after this (duration ago or RFC 3339)")
	fs.StringVar(&f.until, "until", "", "only records that failed before this (duration ago or RFC 3339)")
	fs.StringVar(&f.to, "to", "input", "redrive: where to send records, input or retry")
	fs.BoolVar(&f.dryRun, "dry-run", false, "redrive: show what would be sent, send nothing")
	fs.Usage = func() { fmt.Fprint(stderr, dlqUsage, "\nFlags:\n"); fs.PrintDefaults() }
	// Flags may come before or after the positional argument.
	var positional []string
	for rest := args[1:]; ; {
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	err := runDLQ(sub, &f, positional, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "wasmstream dlq %s: %v\n", sub, err)
		return 1
	}
	return 0
}

func parseWhen(flagName, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--%s %q: want a duration (1h) or an RFC 3339 time", flagName, s)
}

func runDLQ(sub string, f *dlqFlags, args []string, stdout io.Writer) error {
	var err error
	if f.sinceT, err = parseWhen("since", f.since); err != nil {
		return err
	}
	if f.untilT, err = parseWhen("until", f.until); err != nil {
		return err
	}
	if f.to != "input" && f.to != "retry" {
		return fmt.Errorf("--to %q: want input or retry", f.to)
	}
	cfg, err := f.load()
	if err != nil {
		return err
	}
	if cfg.IsEmbedded() {
		return errors.New("the config's broker is embedded: it runs inside `wasmstream run`/`demo`; pass --brokers with the address it printed")
	}
	pc, err := pickPipeline(cfg, f.pipeline)
	if err != nil {
		return err
	}
	var want struct {
		set       bool
		partition int32
		offset    int64
	}
	if sub == "show" {
		if len(args) != 1 {
			return errors.New("want one PARTITION@OFFSET argument, as `dlq list` prints it")
		}
		ps, os, ok := strings.Cut(args[0], "@")
		p, err1 := strconv.ParseInt(ps, 10, 32)
		o, err2 := strconv.ParseInt(os, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("%q: want PARTITION@OFFSET, e.g. 0@42", args[0])
		}
		want.set, want.partition, want.offset = true, int32(p), o
	} else if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q", args[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	recs, err := readAll(ctx, cfg.Kafka.Brokers, pc.DeadLetterTopic)
	if err != nil {
		return err
	}
	var prod *kgo.Client
	if sub == "redrive" && !f.dryRun {
		if prod, err = kgo.NewClient(kgo.SeedBrokers(cfg.Kafka.Brokers...)); err != nil {
			return err
		}
		defer prod.Close()
	}
	n := 0
	for _, r := range recs {
		if want.set {
			if r.Partition == want.partition && r.Offset == want.offset {
				showRecord(stdout, pc.DeadLetterTopic, r)
				return nil
			}
			continue
		}
		if !f.matches(r) {
			continue
		}
		n++
		switch sub {
		case "list":
			fmt.Fprintln(stdout, listLine(r))
		case "redrive":
			dst, rec, err := redriveRecord(cfg, pc, f.to, pc.DeadLetterTopic, r)
			if err != nil {
				return fmt.Errorf("%d@%d: %w", r.Partition, r.Offset, err)
			}
			verb := "redriven"
			if f.dryRun {
				verb = "would redrive"
			} else if err := prod.ProduceSync(ctx, rec).FirstErr(); err != nil {
				return fmt.Errorf("%d@%d: produce to %s: %w (%d records redriven before it)", r.Partition, r.Offset, dst, err, n-1)
			}
			fmt.Fprintf(stdout, "%s %d@%d -> %s\n", verb, r.Partition, r.Offset, dst)
		}
	}
	switch {
	case want.set:
		return fmt.Errorf("no record %d@%d in %s", want.partition, want.offset, pc.DeadLetterTopic)
	case sub == "list":
		fmt.Fprintf(stdout, "%d of %d dead-lettered records in %s match\n", n, len(recs), pc.DeadLetterTopic)
	case sub == "redrive" && f.dryRun:
		fmt.Fprintf(stdout, "%d records would be redriven (dry run: nothing sent)\n", n)
	case sub == "redrive":
		fmt.Fprintf(stdout, "%d records redriven\n", n)
	}
	return nil
}

func pickPipeline(cfg *config.Config, name string) (*config.Pipeline, error) {
	if name == "" {
		if len(cfg.Pipelines) == 1 {
			return &cfg.Pipelines[0], nil
		}
		var names []string
		for _, p := range cfg.Pipelines {
			names = append(names, p.Name)
		}
		return nil, fmt.Errorf("the config has %d pipelines: choose one with --pipeline (%s)", len(names), strings.Join(names, ", "))
	}
	for i := range cfg.Pipelines {
		if cfg.Pipelines[i].Name == name {
			return &cfg.Pipelines[i], nil
		}
	}
	return nil, fmt.Errorf("--pipeline %q: no such pipeline in the config", name)
}

// readAll reads topic from its start to its end as of now.
func readAll(ctx context.Context, brokers []string, topic string) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	parts := map[int32]kgo.Offset{}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, o.Partition)
		if o.Offset > s.Offset {
			parts[o.Partition] = kgo.NewOffset().At(s.Offset)
			remaining[o.Partition] = o.Offset
		}
	})
	if len(parts) == 0 {
		return nil, nil
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var out []*kgo.Record
	for len(remaining) > 0 {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %w", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := remaining[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			out = append(out, r)
			if r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
		})
	}
	return out, nil
}

func header(r *kgo.Record, key string) string {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == key {
			return string(r.Headers[i].Value)
		}
	}
	return ""
}

func (f *dlqFlags) matches(r *kgo.Record) bool {
	if f.kind != "" && header(r, scheduler.HeaderErrorKind) != f.kind {
		return false
	}
	if f.errText != "" && !strings.Contains(header(r, scheduler.HeaderError), f.errText) {
		return false
	}
	if f.key != "" && string(r.Key) != f.key {
		return false
	}
	if !f.sinceT.IsZero() || !f.untilT.IsZero() {
		at, err := time.Parse(time.RFC3339Nano, header(r, scheduler.HeaderFailedAt))
		if err != nil {
			at = r.Timestamp
		}
		if (!f.sinceT.IsZero() && at.Before(f.sinceT)) || (!f.untilT.IsZero() && !at.Before(f.untilT)) {
			return false
		}
	}
	return true
}

func listLine(r *kgo.Record) string {
	msg := header(r, scheduler.HeaderError)
	if i := strings.Index(msg, "; guest output:"); i > 0 {
		msg = msg[:i]
	}
	if len(msg) > 100 {
		msg = msg[:100] + "…"
	}
	return fmt.Sprintf("%d@%d  %s  from %s[%s]@%s  attempts %s  %s  key=%q  %s",
		r.Partition, r.Offset, header(r, scheduler.HeaderFailedAt),
		header(r, scheduler.HeaderOriginalTopic), header(r, scheduler.HeaderOriginalPartition), header(r, scheduler.HeaderOriginalOffset),
		header(r, scheduler.HeaderAttempt), header(r, scheduler.HeaderErrorKind), r.Key, msg)
}

func showRecord(w io.Writer, topic string, r *kgo.Record) {
	fmt.Fprintf(w, "%s[%d]@%d (appended %s)\n", topic, r.Partition, r.Offset, r.Timestamp.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(w, "  key:   %q\n  value: %q\n", r.Key, r.Value)
	fmt.Fprintf(w, "  error: %s: %s\n", header(r, scheduler.HeaderErrorKind), header(r, scheduler.HeaderError))
	fmt.Fprintf(w, "  history:\n")
	for _, h := range r.Headers {
		if strings.HasPrefix(h.Key, scheduler.HeaderHistoryPrefix) {
			fmt.Fprintf(w, "    attempt %s: %s\n", strings.TrimPrefix(h.Key, scheduler.HeaderHistoryPrefix), h.Value)
		}
	}
	fmt.Fprintf(w, "  headers:\n")
	for _, h := range r.Headers {
		if !strings.HasPrefix(h.Key, scheduler.HeaderHistoryPrefix) {
			fmt.Fprintf(w, "    %s: %q\n", h.Key, h.Value)
		}
	}
}

// redriveRecord builds the copy of dead letter r to send back.
func redriveRecord(cfg *config.Config, pc *config.Pipeline, to, dlqTopic string, r *kgo.Record) (string, *kgo.Record, error) {
	var hs []kgo.RecordHeader
	for _, h := range r.Headers {
		if !strings.HasPrefix(h.Key, scheduler.HeaderPrefix) {
			hs = append(hs, h) // the record's own headers, trace context included
		}
	}
	hs = append(hs, kgo.RecordHeader{Key: scheduler.HeaderRedrivenFrom, Value: []byte(fmt.Sprintf("%s[%d]@%d", dlqTopic, r.Partition, r.Offset))})
	if to == "retry" {
		topics := pc.RetryTopics()
		if len(topics) == 0 {
			return "", nil, fmt.Errorf("--to retry: pipeline %s has no retry topics (retry.mode topics with max_attempts >= 2)", pc.Name)
		}
		for _, k := range []string{scheduler.HeaderOriginalTopic, scheduler.HeaderOriginalPartition, scheduler.HeaderOriginalOffset, scheduler.HeaderOriginalTimestamp} {
			hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(header(r, k))})
		}
		hs = append(hs,
			kgo.RecordHeader{Key: scheduler.HeaderAttempt, Value: []byte("2")},
			kgo.RecordHeader{Key: scheduler.HeaderDue, Value: []byte(strconv.FormatInt(time.Now().UnixMilli(), 10))},
		)
		return topics[0], &kgo.Record{Topic: topics[0], Key: r.Key, Value: r.Value, Headers: hs}, nil
	}
	dst := header(r, scheduler.HeaderOriginalTopic)
	ok := false
	for _, in := range pc.Inputs {
		ok = ok || in == dst
	}
	if !ok {
		return "", nil, fmt.Errorf("its original topic %q is not an input of pipeline %s", dst, pc.Name)
	}
	return dst, &kgo.Record{Topic: dst, Key: r.Key, Value: r.Value, Headers: hs}, nil
}
