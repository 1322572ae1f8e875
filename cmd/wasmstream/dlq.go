package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/failhdr"
	"github.com/wasmstream/wasmstream/internal/kafkaconn"
	"github.com/wasmstream/wasmstream/internal/pinpart"
	"github.com/wasmstream/wasmstream/internal/termsafe"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tracing"
)

const dlqUsage = `Usage:
  wasmstream dlq list    [--config F] [--pipeline NAME] [--pending] [filters]
  wasmstream dlq show    [--config F] [--pipeline NAME] PARTITION@OFFSET
  wasmstream dlq redrive [--config F] [--pipeline NAME] [--to input|retry] [--partition original|key] [--dry-run] [--force] [filters]

Inspects a pipeline's dead-letter topic: each record with where it came from,
how many attempts it had and every attempt's error; and sends records back —
to the input topic they came from (a fresh start: attempt 1, at its new
offset, on the partition it was first consumed from; --partition key places
it by its key instead, as the host places its outputs), or to the first
retry tier (processed by the retry workers as the next attempt, keeping
where it was first consumed and its history; placed by its key). A
redriven record keeps its key, value and own headers (its trace context
included) and is marked with wasmstream.redriven.from. A record that cannot
be redriven is reported and skipped; the others are still sent, and the
command then exits with status 1. Each record redriven is recorded in the
compacted topic <dead_letter_topic>.redriven (created when missing) once its
copy is acknowledged, by the dead-letter topic's ID and the dead letter's
identity (where it was first consumed, its attempt, a digest of it): list
shows it as redriven, list --pending hides it, and a second redrive of it is
refused (not sent, reported, exit status 1) unless --force. A marker that
does not name the dead letter at its place in full (the topic deleted and
created again since, a forged or an old-format marker) is ignored and
reported: it hides nothing.

Filters:
  --kind KIND     error kind (guest.fail, guest.retry, fault.panic, ...)
  --error TEXT    error message contains TEXT
  --key KEY       record key equals KEY
  --version V     failed on module version V: its label (deploy --label) or
                  its digest (or the digest's first 6 or more hex digits),
                  as list prints them. A canary's dead letters are redriven
                  apart from the stable version's rejections with the
                  canary's digest or label.
  --since T       failed at or after T (a duration ago, e.g. 1h, or RFC 3339)
  --until T       failed before T
`

type dlqFlags struct {
	commonFlags
	pipeline string
	kind     string
	errText  string
	key      string
	version  string
	since    string
	until    string
	to       string
	dryRun   bool
	pending  bool
	force    bool
	// partition: where copies to the input go: "original" (the default)
	// or "key".
	partition string
	sinceT    time.Time
	untilT    time.Time
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
	fs.StringVar(&f.version, "version", "", "only records failed on this module version: its label, or its digest or a prefix of it (6 hex digits or more)")
	fs.StringVar(&f.since, "since", "", "only records that failed at or after this (duration ago or RFC 3339)")
	fs.StringVar(&f.until, "until", "", "only records that failed before this (duration ago or RFC 3339)")
	fs.StringVar(&f.to, "to", "input", "redrive: where to send records, input or retry")
	fs.BoolVar(&f.dryRun, "dry-run", false, "redrive: show what would be sent, send nothing")
	fs.BoolVar(&f.pending, "pending", false, "list: only records not redriven yet")
	fs.BoolVar(&f.force, "force", false, "redrive: send records already redriven again")
	fs.StringVar(&f.partition, "partition", "", "redrive --to input: original (default: the partition each record was first consumed from) or key (placed by key, as the host places its outputs)")
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
	err := runDLQ(sub, &f, positional, stdout, stderr)
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

func runDLQ(sub string, f *dlqFlags, args []string, stdout, stderr io.Writer) error {
	if err := f.check(); err != nil {
		return err
	}
	cfg, pc, err := f.loadPipeline(stderr)
	if err != nil {
		return err
	}
	want, err := showTarget(sub, args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dl, err := readDeadLetters(ctx, cfg.Kafka, pc.DeadLetterTopic)
	if err != nil {
		return err
	}
	if sub == "show" {
		return showOne(stdout, dl, want)
	}
	run := &dlqRun{sub: sub, f: f, pc: pc, dl: dl, stdout: stdout}
	if run.ledger, err = readLedger(ctx, cfg.Kafka, dl); err != nil {
		return err
	}
	if sub == "redrive" {
		err := run.prepareRedrive(ctx, cfg.Kafka)
		if run.prod != nil {
			defer run.prod.Close()
		}
		if err != nil {
			return err
		}
	}
	for _, r := range dl.recs {
		run.one(ctx, r)
	}
	run.summary()
	run.ledger.report(stderr)
	return run.err()
}

// check validates the flags that need no config.
func (f *dlqFlags) check() error {
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
	if f.partition != "" && f.partition != "original" && f.partition != "key" {
		return fmt.Errorf("--partition %q: want original or key", f.partition)
	}
	if f.to == "retry" && f.partition == "original" {
		return errors.New("--partition original: only with --to input (a retry tier's partitions are not the input's: copies to it are placed by key, as the host places its own)")
	}
	return nil
}

// pinned: copies go back to the partition their dead letter was first
// consumed from (the default with --to input), not where their key hashes.
func (f *dlqFlags) pinned() bool { return f.to == "input" && f.partition != "key" }

// loadPipeline loads the config and picks the pipeline.
func (f *dlqFlags) loadPipeline(stderr io.Writer) (*config.Config, *config.Pipeline, error) {
	cfg, err := f.load()
	if err != nil {
		return nil, nil, err
	}
	for _, w := range kafkaconn.Warnings(cfg.Kafka) {
		fmt.Fprintf(stderr, "wasmstream dlq: warning: %s\n", w)
	}
	if cfg.IsEmbedded() {
		return nil, nil, errors.New("the config's broker is embedded: it runs inside `wasmstream run`/`demo`; pass --brokers with the address it printed")
	}
	pc, err := pickPipeline(cfg, f.pipeline)
	if err != nil {
		return nil, nil, err
	}
	return cfg, pc, nil
}

// place is a record's partition and offset in its topic.
type place struct {
	partition int32
	offset    int64
}

// showTarget is the PARTITION@OFFSET argument of `dlq show`; the other
// subcommands take no argument.
func showTarget(sub string, args []string) (place, error) {
	if sub != "show" {
		if len(args) > 0 {
			return place{}, fmt.Errorf("unexpected argument %q", args[0])
		}
		return place{}, nil
	}
	if len(args) != 1 {
		return place{}, errors.New("want one PARTITION@OFFSET argument, as `dlq list` prints it")
	}
	ps, offs, ok := strings.Cut(args[0], "@")
	p, err1 := strconv.ParseInt(ps, 10, 32)
	o, err2 := strconv.ParseInt(offs, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return place{}, fmt.Errorf("%q: want PARTITION@OFFSET, e.g. 0@42", args[0])
	}
	return place{int32(p), o}, nil
}

// showOne prints the dead letter at want.
func showOne(w io.Writer, dl *deadLetters, want place) error {
	for _, r := range dl.recs {
		if r.Partition == want.partition && r.Offset == want.offset {
			showRecord(w, dl.topic, r)
			return nil
		}
	}
	return fmt.Errorf("no record %d@%d in %s", want.partition, want.offset, dl.topic)
}

// dlqRun is one `dlq list` or `dlq redrive`: what it read, what it sends
// with, and the tally its summary and exit status come from.
type dlqRun struct {
	sub    string
	f      *dlqFlags
	pc     *config.Pipeline
	dl     *deadLetters
	ledger *ledger
	stdout io.Writer
	prod   *kgo.Client      // redrive, not a dry run: sends the copies and their markers
	parts  map[string]int32 // redrive pinned to the original partition: each input's partition count

	n, refused, unmarked int
	bad                  []string // records redrive could not send, with the reason
}

// prepareRedrive reads the inputs' partition counts (copies pinned to their
// original partition) and, unless a dry run, opens the producer and makes
// sure the marker topic exists. run.prod is set even on error: the caller
// closes it.
func (run *dlqRun) prepareRedrive(ctx context.Context, k config.Kafka) error {
	if run.f.pinned() {
		parts, err := partitionCounts(ctx, k, run.pc.Inputs)
		if err != nil {
			return err
		}
		run.parts = parts
	}
	if run.f.dryRun {
		return nil
	}
	// Copies pinned to their original partition go there; the others, and
	// the markers, are placed as the host places its outputs (pinpart).
	prod, err := kafkaconn.NewClient(k, k.Brokers, kgo.RecordPartitioner(pinpart.New()))
	if err != nil {
		return err
	}
	run.prod = prod
	return ensureMarkerTopic(ctx, prod, run.pc.DeadLetterTopic)
}

// one lists or redrives dead letter r, if the filters match it.
func (run *dlqRun) one(ctx context.Context, r *kgo.Record) {
	st, decodeErr := failhdr.Decode(r.Headers)
	if !run.f.matches(r, &st) {
		return
	}
	mark, done, ignored := run.ledger.lookup(run.dl, r, &st)
	if done && run.sub == "list" && run.f.pending {
		return
	}
	run.n++
	if run.sub == "redrive" {
		run.redrive(ctx, r, &st, decodeErr, mark, done, ignoredNote(ignored))
		return
	}
	line := listLine(r, &st)
	if done {
		line += fmt.Sprintf("  [redriven %s -> %s %s]", mark.At.Format(time.RFC3339), termsafe.Line(mark.To), termsafe.Line(mark.Copy))
	}
	fmt.Fprintln(run.stdout, line+ignoredNote(ignored))
}

// ignoredNote is why a marker at a dead letter's place was ignored, for
// the end of its line; "" if none was.
func ignoredNote(ignored string) string {
	if ignored == "" {
		return ""
	}
	return "  [marker ignored: " + termsafe.Line(ignored) + "]"
}

// redrive sends dead letter r back (or says it would, in a dry run), or
// reports why it does not; mark and done are its redrive marker, note why
// a marker at its place was ignored.
func (run *dlqRun) redrive(ctx context.Context, r *kgo.Record, st *failhdr.State, decodeErr error, mark redriven, done bool, note string) {
	if done && !run.f.force {
		run.refused++
		fmt.Fprintf(run.stdout, "refused %d@%d: redriven already at %s -> %s %s (--force sends it again)\n", r.Partition, r.Offset, mark.At.Format(time.RFC3339), termsafe.Line(mark.To), termsafe.Line(mark.Copy))
		return
	}
	// One bad record is reported and skipped: the others still go.
	dst, rec, err := redriveRecord(run.pc, run.f.to, run.parts, run.dl.topic, r, st, decodeErr)
	if err == nil && !run.f.dryRun {
		err = produceRedrive(ctx, run.prod, run.dl, r, st, rec)
		if err == nil || errors.Is(err, errNotMarked) {
			dst = fmt.Sprintf("%s[%d]", rec.Topic, rec.Partition) // where the copy went
		}
		if errors.Is(err, errNotMarked) {
			run.unmarked++
			fmt.Fprintf(run.stdout, "redriven %d@%d -> %s, NOT recorded: %s (a second redrive would send it again)\n", r.Partition, r.Offset, termsafe.Line(dst), termsafe.Line(err.Error()))
			return
		}
		if err != nil {
			err = fmt.Errorf("produce to %s: %w", dst, err)
		}
	}
	if err != nil {
		msg := fmt.Sprintf("%d@%d: %s", r.Partition, r.Offset, termsafe.Line(err.Error()))
		run.bad = append(run.bad, msg)
		fmt.Fprintf(run.stdout, "not redriven %s\n", msg)
		return
	}
	verb := "redriven"
	if run.f.dryRun {
		verb = "would redrive"
	}
	fmt.Fprintf(run.stdout, "%s %d@%d -> %s%s\n", verb, r.Partition, r.Offset, termsafe.Line(dst), note)
}

// summary prints the closing count line.
func (run *dlqRun) summary() {
	n, bad, refused, topic := run.n, len(run.bad), run.refused, run.dl.topic
	switch {
	case run.sub == "list" && run.f.pending:
		fmt.Fprintf(run.stdout, "%d of %d dead-lettered records in %s match and are not redriven\n", n, len(run.dl.recs), topic)
	case run.sub == "list":
		fmt.Fprintf(run.stdout, "%d of %d dead-lettered records in %s match\n", n, len(run.dl.recs), topic)
	case run.f.dryRun:
		fmt.Fprintf(run.stdout, "%d records would be redriven (dry run: nothing sent), %d could not be, %d redriven already\n", n-bad-refused, bad, refused)
	default:
		fmt.Fprintf(run.stdout, "%d records redriven, %d could not be, %d refused as redriven already (--force)\n", n-bad-refused, bad, refused)
	}
}

// err is the run's failure, nil if every matching record was listed or
// sent: a record not recorded, not sent or refused makes redrive exit 1, so
// that a script sees a redrive that left records behind.
func (run *dlqRun) err() error {
	var errs []string
	if run.unmarked > 0 {
		errs = append(errs, fmt.Sprintf("%d records were redriven but their redrive could not be recorded in %s%s: a second redrive would send them again", run.unmarked, run.dl.topic, redrivenSuffix))
	}
	if len(run.bad) > 0 {
		const shown = 5
		bad, more := run.bad, ""
		if len(bad) > shown {
			more = fmt.Sprintf("; and %d more above", len(bad)-shown)
			bad = bad[:shown]
		}
		errs = append(errs, fmt.Sprintf("%d of %d matching records could not be redriven: %s%s", len(run.bad), run.n, strings.Join(bad, "; "), more))
	}
	if run.refused > 0 {
		errs = append(errs, fmt.Sprintf("%d of %d matching records refused as redriven already (--force sends them again)", run.refused, run.n))
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "; "))
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

// deadLetters is a dead-letter topic as read: its records, and which
// topic it was — its topic ID, the identity its redrive markers name (a
// topic deleted and created again under the same name is another topic).
type deadLetters struct {
	topic string
	id    string // the topic ID as Kafka prints it (URL-safe base64); "" if the brokers have none
	recs  []*kgo.Record
}

// readDeadLetters reads the dead-letter topic and its ID, which must be
// the same before and after: the records are then of that topic.
func readDeadLetters(ctx context.Context, k config.Kafka, topic string) (*deadLetters, error) {
	before, err := topicID(ctx, k, topic)
	if err != nil {
		return nil, err
	}
	recs, err := readAll(ctx, k, topic)
	if err != nil {
		return nil, err
	}
	after, err := topicID(ctx, k, topic)
	if err != nil {
		return nil, err
	}
	if before != after {
		return nil, fmt.Errorf("topic %s was deleted and created again while it was read (topic ID %s, then %s): run the command again", topic, before, after)
	}
	return &deadLetters{topic: topic, id: before, recs: recs}, nil
}

// topicID is topic's ID in the cluster's metadata, as Kafka prints it; ""
// if the brokers have no topic IDs (before Kafka 2.8).
func topicID(ctx context.Context, k config.Kafka, topic string) (string, error) {
	cl, err := kafkaconn.NewClient(k, k.Brokers)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	ts, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err == nil {
		if d, ok := ts[topic]; !ok {
			err = kerr.UnknownTopicOrPartition
		} else {
			err = d.Err
		}
	}
	if err != nil {
		return "", fmt.Errorf("topic %s: %w", topic, kafkaconn.Explain(k, err))
	}
	id := ts[topic].ID
	if id == (kadm.TopicID{}) {
		return "", nil
	}
	return base64.RawURLEncoding.EncodeToString(id[:]), nil
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
	if f.version != "" && !versionMatches(f.version, st) {
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

// minDigestPrefix is the shortest digest prefix --version takes as one: a
// shorter value is only compared with labels.
const minDigestPrefix = 6

// versionMatches reports whether v names the version a dead letter failed
// on: its label, or its digest (with or without "sha256:") or a prefix of
// it of at least minDigestPrefix characters.
func versionMatches(v string, st *failhdr.State) bool {
	if st.ModuleLabel != "" && v == st.ModuleLabel {
		return true
	}
	d, want := strings.TrimPrefix(st.ModuleDigest, "sha256:"), strings.TrimPrefix(v, "sha256:")
	return d != "" && len(want) >= minDigestPrefix && strings.HasPrefix(d, want)
}

// versionText is the version a dead letter failed on, as list prints it:
// the digest's first 12 characters and the label, if any.
func versionText(st *failhdr.State) string {
	d := strings.TrimPrefix(st.ModuleDigest, "sha256:")
	if len(d) > 12 {
		d = d[:12]
	}
	if d == "" {
		d = "-"
	}
	if st.ModuleLabel != "" {
		d += " (" + termsafe.Line(st.ModuleLabel) + ")"
	}
	return termsafe.Line(d)
}

// keyText is a record key as list and show print it: quoted, or null for
// a record without one (not "", which is an empty key).
func keyText(k []byte) string {
	if k == nil {
		return "null"
	}
	return strconv.Quote(string(k))
}

// listLine is one dead letter in `dlq list`; everything from the record is
// escaped (termsafe).
func listLine(r *kgo.Record, st *failhdr.State) string {
	msg := st.Error
	if i := strings.Index(msg, "; guest output:"); i > 0 {
		msg = msg[:i]
	}
	msg = tracing.OneLine(termsafe.Line(msg), 100)
	return fmt.Sprintf("%d@%d  %s  from %s[%s]@%s  attempts %s  %s  version=%s  key=%s  %s  value=%s",
		r.Partition, r.Offset, printableHeader(r, failhdr.FailedAt),
		printableHeader(r, failhdr.OriginalTopic), printableHeader(r, failhdr.OriginalPartition), printableHeader(r, failhdr.OriginalOffset),
		printableHeader(r, failhdr.Attempt), termsafe.Line(st.Kind), versionText(st), keyText(r.Key), msg, preview(r.Value))
}

// showRecord prints one dead letter in full for `dlq show`; everything from
// the record is escaped (termsafe), multi-line messages indented.
func showRecord(w io.Writer, topic string, r *kgo.Record) {
	const indent = "      "
	fmt.Fprintf(w, "%s[%d]@%d (appended %s)\n", topic, r.Partition, r.Offset, r.Timestamp.UTC().Format(time.RFC3339Nano))
	value := "null"
	if r.Value != nil {
		value = strconv.Quote(string(r.Value))
	}
	fmt.Fprintf(w, "  key:   %s\n  value: %s\n", keyText(r.Key), value)
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

// produceRedrive sends the copy rec of dead letter r (st: what its headers
// say) and, once it is acknowledged, its marker: a crash between the two
// can send a record twice (a later redrive sends it again), never mark one
// not sent.
func produceRedrive(ctx context.Context, prod *kgo.Client, dl *deadLetters, r *kgo.Record, st *failhdr.State, rec *kgo.Record) error {
	if err := prod.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return err
	}
	if err := prod.ProduceSync(ctx, markerRecord(dl, r, st, rec)).FirstErr(); err != nil {
		return fmt.Errorf("%w: %v", errNotMarked, err)
	}
	return nil
}

// redriveRecord builds the copy of dead letter r (st and decodeErr: what its
// headers say) to send back; an error says why r cannot be. See
// RATIONALE.md, "Retries", on redrive: to the input it is a fresh start
// (only its own headers and the wasmstream.redriven.from mark), on the
// partition it was first consumed from when parts (each input's partition
// count) is given, else placed by its key; to the first retry tier it keeps
// where it was first consumed and its history, on the next attempt, placed
// by its key as the host places its own retry copies.
func redriveRecord(pc *config.Pipeline, to string, parts map[string]int32, dlqTopic string, r *kgo.Record, st *failhdr.State, decodeErr error) (string, *kgo.Record, error) {
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
		return topics[0], &kgo.Record{Topic: topics[0], Partition: -1, Key: r.Key, Value: r.Value, Headers: failhdr.Encode(hs, &next)}, nil
	}
	dst := st.Origin.Topic
	hs = append(hs, kgo.RecordHeader{Key: failhdr.RedrivenFrom, Value: []byte(from)})
	rec := &kgo.Record{Topic: dst, Partition: -1, Key: r.Key, Value: r.Value, Headers: hs}
	if parts != nil {
		p, err := originalPartition(parts, st, decodeErr)
		if err != nil {
			return "", nil, err
		}
		rec.Partition = p
		dst = fmt.Sprintf("%s[%d]", dst, p)
	}
	return dst, rec, nil
}

// originalPartition is the partition a dead letter was first consumed
// from, if its topic (an input, of parts partitions) still has it.
func originalPartition(parts map[string]int32, st *failhdr.State, decodeErr error) (int32, error) {
	if failhdr.Unusable(decodeErr, failhdr.OriginalPartition) {
		return 0, fmt.Errorf("it has no usable %s header (--partition key sends it by its key)", failhdr.OriginalPartition)
	}
	n, ok := parts[st.Origin.Topic]
	if !ok {
		return 0, fmt.Errorf("its original topic %q is not in the cluster's metadata", st.Origin.Topic)
	}
	if st.Origin.Partition >= n {
		return 0, fmt.Errorf("its original partition %d is not in %s (%d partitions; --partition key sends it by its key)", st.Origin.Partition, st.Origin.Topic, n)
	}
	return st.Origin.Partition, nil
}

// partitionCounts is the partition count of each of topics in the
// cluster's metadata (a topic missing from it is left out).
func partitionCounts(ctx context.Context, k config.Kafka, topics []string) (map[string]int32, error) {
	cl, err := kafkaconn.NewClient(k, k.Brokers)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ts, err := kadm.NewClient(cl).ListTopics(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("topics %s: %w", strings.Join(topics, ", "), kafkaconn.Explain(k, err))
	}
	out := map[string]int32{}
	for _, d := range ts {
		if d.Err == nil && len(d.Partitions) > 0 {
			out[d.Topic] = int32(len(d.Partitions))
		}
	}
	return out, nil
}
