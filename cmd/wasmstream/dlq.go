package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/failhdr"
	"github.com/wasmstream/wasmstream/internal/kafkaconn"
	"github.com/wasmstream/wasmstream/internal/termsafe"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tracing"
)

const dlqUsage = `Usage:
  wasmstream dlq list    [--config F] [--pipeline NAME] [--pending] [filters]
  wasmstream dlq show    [--config F] [--pipeline NAME] PARTITION@OFFSET
  wasmstream dlq redrive [--config F] [--pipeline NAME] [--to input|retry] [--dry-run] [--force] [filters]

Inspects a pipeline's dead-letter topic: each record with where it came from,
how many attempts it had and every attempt's error; and sends records back —
to the input topic they came from (a fresh start: attempt 1, at its new
offset), or to the first retry tier (processed by the retry workers as the
next attempt, keeping where it was first consumed and its history). A
redriven record keeps its key, value and own headers (its trace context
included) and is marked with wasmstream.redriven.from. A record that cannot
be redriven is reported and skipped; the others are still sent, and the
command then exits with status 1. Each record redriven is recorded in the
compacted topic <dead_letter_topic>.redriven (created when missing) once its
copy is acknowledged: list shows it as redriven, list --pending hides it, and
a second redrive of it is refused (not sent, reported) unless --force.

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
	pending  bool
	force    bool
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
	f.register(fs, config.DefaultFile)
	fs.StringVar(&f.pipeline, "pipeline", "", "pipeline name (default: the config's only pipeline)")
	fs.StringVar(&f.kind, "kind", "", "only records whose error kind is KIND")
	fs.StringVar(&f.errText, "error", "", "only records whose error contains TEXT")
	fs.StringVar(&f.key, "key", "", "only records with this key")
	fs.StringVar(&f.since, "since", "", "only records that failed at or after this (duration ago or RFC 3339)")
	fs.StringVar(&f.until, "until", "", "only records that failed before this (duration ago or RFC 3339)")
	fs.StringVar(&f.to, "to", "input", "redrive: where to send records, input or retry")
	fs.BoolVar(&f.dryRun, "dry-run", false, "redrive: show what would be sent, send nothing")
	fs.BoolVar(&f.pending, "pending", false, "list: only records not redriven yet")
	fs.BoolVar(&f.force, "force", false, "redrive: send records already redriven again")
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
		printErr(stderr, "wasmstream dlq "+sub, err)
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
	for _, w := range kafkaconn.Warnings(cfg.Kafka) {
		fmt.Fprintf(os.Stderr, "wasmstream dlq: warning: %s\n", w)
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
	recs, err := readAll(ctx, cfg.Kafka, pc.DeadLetterTopic)
	if err != nil {
		return err
	}
	markers, err := readMarkers(ctx, cfg.Kafka, pc.DeadLetterTopic)
	if err != nil {
		return err
	}
	var prod *kgo.Client
	if sub == "redrive" && !f.dryRun {
		if prod, err = kafkaconn.NewClient(cfg.Kafka, cfg.Kafka.Brokers); err != nil {
			return err
		}
		defer prod.Close()
		if err := ensureMarkerTopic(ctx, prod, pc.DeadLetterTopic); err != nil {
			return err
		}
	}
	n, refused, unmarked := 0, 0, 0
	var bad []string // records redrive could not send, with the reason
	for _, r := range recs {
		if want.set {
			if r.Partition == want.partition && r.Offset == want.offset {
				showRecord(stdout, pc.DeadLetterTopic, r)
				return nil
			}
			continue
		}
		st, decodeErr := failhdr.Decode(r.Headers)
		if !f.matches(r, &st) {
			continue
		}
		mark, done := markers[markerKey(r.Partition, r.Offset)]
		if done && sub == "list" && f.pending {
			continue
		}
		n++
		switch sub {
		case "list":
			line := listLine(r, &st)
			if done {
				line += fmt.Sprintf("  [redriven %s -> %s %s]", mark.At.Format(time.RFC3339), termsafe.Line(mark.To), termsafe.Line(mark.Copy))
			}
			fmt.Fprintln(stdout, line)
		case "redrive":
			if done && !f.force {
				refused++
				fmt.Fprintf(stdout, "refused %d@%d: redriven already at %s -> %s %s (--force sends it again)\n", r.Partition, r.Offset, mark.At.Format(time.RFC3339), termsafe.Line(mark.To), termsafe.Line(mark.Copy))
				continue
			}
			// One bad record is reported and skipped: the others still go.
			dst, rec, err := redriveRecord(pc, f.to, pc.DeadLetterTopic, r, &st, decodeErr)
			if err == nil && !f.dryRun {
				err = produceRedrive(ctx, prod, pc.DeadLetterTopic, r, rec)
				if errors.Is(err, errNotMarked) {
					unmarked++
					fmt.Fprintf(stdout, "redriven %d@%d -> %s, NOT recorded: %s (a second redrive would send it again)\n", r.Partition, r.Offset, termsafe.Line(dst), termsafe.Line(err.Error()))
					continue
				}
				if err != nil {
					err = fmt.Errorf("produce to %s: %w", dst, err)
				}
			}
			if err != nil {
				msg := fmt.Sprintf("%d@%d: %s", r.Partition, r.Offset, termsafe.Line(err.Error()))
				bad = append(bad, msg)
				fmt.Fprintf(stdout, "not redriven %s\n", msg)
				continue
			}
			verb := "redriven"
			if f.dryRun {
				verb = "would redrive"
			}
			fmt.Fprintf(stdout, "%s %d@%d -> %s\n", verb, r.Partition, r.Offset, termsafe.Line(dst))
		}
	}
	switch {
	case want.set:
		return fmt.Errorf("no record %d@%d in %s", want.partition, want.offset, pc.DeadLetterTopic)
	case sub == "list" && f.pending:
		fmt.Fprintf(stdout, "%d of %d dead-lettered records in %s match and are not redriven\n", n, len(recs), pc.DeadLetterTopic)
	case sub == "list":
		fmt.Fprintf(stdout, "%d of %d dead-lettered records in %s match\n", n, len(recs), pc.DeadLetterTopic)
	case sub == "redrive" && f.dryRun:
		fmt.Fprintf(stdout, "%d records would be redriven (dry run: nothing sent), %d could not be, %d redriven already\n", n-len(bad)-refused, len(bad), refused)
	case sub == "redrive":
		fmt.Fprintf(stdout, "%d records redriven, %d could not be, %d refused as redriven already (--force)\n", n-len(bad)-refused, len(bad), refused)
	}
	if unmarked > 0 {
		return fmt.Errorf("%d records were redriven but their redrive could not be recorded in %s%s: a second redrive would send them again", unmarked, pc.DeadLetterTopic, redrivenSuffix)
	}
	if len(bad) > 0 {
		const shown = 5
		count, more := len(bad), ""
		if count > shown {
			more = fmt.Sprintf("; and %d more above", count-shown)
			bad = bad[:shown]
		}
		return fmt.Errorf("%d of %d matching records could not be redriven: %s%s", count, n, strings.Join(bad, "; "), more)
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
func readAll(ctx context.Context, k config.Kafka, topic string) ([]*kgo.Record, error) {
	cl, err := kafkaconn.NewClient(k, k.Brokers)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, kafkaconn.Explain(k, err))
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
	rd, err := kafkaconn.NewClient(k, k.Brokers, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
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

// printableHeader is header escaped for the terminal (termsafe.Line).
func printableHeader(r *kgo.Record, key string) string { return termsafe.Line(header(r, key)) }

// printable is b (a record's key or value) escaped for the terminal.
func printable(b []byte) string { return termsafe.Line(string(b)) }

// header is the value of r's last header named key, raw.
func header(r *kgo.Record, key string) string {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == key {
			return string(r.Headers[i].Value)
		}
	}
	return ""
}

func (f *dlqFlags) matches(r *kgo.Record, st *failhdr.State) bool {
	if f.kind != "" && st.Kind != f.kind {
		return false
	}
	if f.errText != "" && !strings.Contains(st.Error, f.errText) {
		return false
	}
	if f.key != "" && string(r.Key) != f.key {
		return false
	}
	if !f.sinceT.IsZero() || !f.untilT.IsZero() {
		at := st.FailedAt
		if at.IsZero() {
			at = r.Timestamp
		}
		if (!f.sinceT.IsZero() && at.Before(f.sinceT)) || (!f.untilT.IsZero() && !at.Before(f.untilT)) {
			return false
		}
	}
	return true
}

// listLine is one dead letter in `dlq list`; everything from the record is
// escaped (termsafe).
func listLine(r *kgo.Record, st *failhdr.State) string {
	msg := st.Error
	if i := strings.Index(msg, "; guest output:"); i > 0 {
		msg = msg[:i]
	}
	msg = tracing.OneLine(termsafe.Line(msg), 100)
	return fmt.Sprintf("%d@%d  %s  from %s[%s]@%s  attempts %s  %s  key=%q  %s  value=%s",
		r.Partition, r.Offset, printableHeader(r, failhdr.FailedAt),
		printableHeader(r, failhdr.OriginalTopic), printableHeader(r, failhdr.OriginalPartition), printableHeader(r, failhdr.OriginalOffset),
		printableHeader(r, failhdr.Attempt), termsafe.Line(st.Kind), r.Key, msg, preview(r.Value))
}

// showRecord prints one dead letter in full for `dlq show`; everything from
// the record is escaped (termsafe), multi-line messages indented.
func showRecord(w io.Writer, topic string, r *kgo.Record) {
	const indent = "      "
	fmt.Fprintf(w, "%s[%d]@%d (appended %s)\n", topic, r.Partition, r.Offset, r.Timestamp.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(w, "  key:   %q\n  value: %q\n", r.Key, r.Value)
	fmt.Fprintf(w, "  error: %s: %s\n", printableHeader(r, failhdr.ErrorKind), termsafe.Text(header(r, failhdr.Error), indent))
	fmt.Fprintf(w, "  history:\n")
	for _, h := range r.Headers {
		if strings.HasPrefix(h.Key, failhdr.HistoryPrefix) {
			fmt.Fprintf(w, "    attempt %s: %s\n", termsafe.Line(strings.TrimPrefix(h.Key, failhdr.HistoryPrefix)), termsafe.Text(string(h.Value), indent))
		}
	}
	fmt.Fprintf(w, "  headers:\n")
	for _, h := range r.Headers {
		if !strings.HasPrefix(h.Key, failhdr.HistoryPrefix) {
			fmt.Fprintf(w, "    %s: %q\n", termsafe.Line(h.Key), h.Value)
		}
	}
	if _, err := failhdr.Decode(r.Headers); err != nil {
		fmt.Fprintf(w, "  malformed: %s\n", termsafe.Line(err.Error()))
	}
}

// errNotMarked: the copy was sent, its marker was not written.
var errNotMarked = errors.New("recording the redrive failed")

// produceRedrive sends the copy rec of dead letter r and, once it is
// acknowledged, its marker: a crash between the two can send a record
// twice (a later redrive sends it again), never mark one not sent.
func produceRedrive(ctx context.Context, prod *kgo.Client, dlqTopic string, r, rec *kgo.Record) error {
	if err := prod.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return err
	}
	if err := prod.ProduceSync(ctx, markerRecord(dlqTopic, r, rec)).FirstErr(); err != nil {
		return fmt.Errorf("%w: %v", errNotMarked, err)
	}
	return nil
}

// redriveRecord builds the copy of dead letter r (st and decodeErr: what its
// headers say) to send back; an error says why r cannot be. See
// RATIONALE.md, "Retries", on redrive: to the input it is a fresh start
// (only its own headers and the wasmstream.redriven.from mark); to the first
// retry tier it keeps where it was first consumed and its history, on the
// next attempt.
func redriveRecord(pc *config.Pipeline, to, dlqTopic string, r *kgo.Record, st *failhdr.State, decodeErr error) (string, *kgo.Record, error) {
	from := fmt.Sprintf("%s[%d]@%d", dlqTopic, r.Partition, r.Offset)
	hs := failhdr.Own(r.Headers) // the record's own headers, trace context included
	if failhdr.Unusable(decodeErr, failhdr.OriginalTopic) {
		return "", nil, fmt.Errorf("it has no usable %s header", failhdr.OriginalTopic)
	}
	if !slices.Contains(pc.Inputs, st.Origin.Topic) {
		return "", nil, fmt.Errorf("its original topic %q is not an input of pipeline %s", st.Origin.Topic, pc.Name)
	}
	if to == "retry" {
		topics := pc.RetryTopics()
		if len(topics) == 0 {
			return "", nil, fmt.Errorf("--to retry: pipeline %s has no retry topics (retry.mode topics with max_attempts >= 2)", pc.Name)
		}
		if decodeErr != nil {
			return "", nil, fmt.Errorf("its headers do not say where it was first consumed and how it failed: %w", decodeErr)
		}
		next := *st
		last := next.Attempt
		if h := next.History; len(h) > 0 {
			last = max(last, h[len(h)-1].Attempt)
		}
		if last >= failhdr.MaxAttempt {
			return "", nil, fmt.Errorf("attempt %d: no attempt number left", last)
		}
		next.Attempt, next.Due, next.RedrivenFrom = last+1, time.Now(), from
		return topics[0], &kgo.Record{Topic: topics[0], Key: r.Key, Value: r.Value, Headers: failhdr.Encode(hs, &next)}, nil
	}
	dst := st.Origin.Topic
	hs = append(hs, kgo.RecordHeader{Key: failhdr.RedrivenFrom, Value: []byte(from)})
	return dst, &kgo.Record{Topic: dst, Key: r.Key, Value: r.Value, Headers: hs}, nil
}
