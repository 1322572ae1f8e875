package scheduler

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// The bounds of event-time timers (issue 58 §4, "Bounds"), on the
// in-process broker with host/testdata/timerflood: a guest that sets a
// million timers, timers at the end of time, and a jump of stream time of
// years are refused or served in bounded memory, and the partition goes
// on with its next records.

// timerfloodPath builds host/testdata/timerflood, a processor that sets as
// many timers as its records ask for and emits its firings.
func timerfloodPath(t *testing.T) string {
	return moduleFile(t, "timerflood", func() []byte { return wt.BuildGoGuest(t, "host/testdata/timerflood") })
}

// timerRecord asks timerflood to set n timers of key at at, at+step, ...
// (at "max": math.MaxInt64); the record's timestamp is ts.
func timerRecord(key string, ts int64, n int, at string, step int64) *kgo.Record {
	return &kgo.Record{Topic: "in", Key: []byte(key), Timestamp: time.UnixMilli(ts), Headers: []kgo.RecordHeader{
		{Key: "timers.n", Value: []byte(strconv.Itoa(n))}, {Key: "timers.at", Value: []byte(at)},
		{Key: "timers.step", Value: []byte(strconv.FormatInt(step, 10))}}}
}

// timerPipeline starts timerflood on a one-partition input of the
// in-process broker, its state in a directory of its own; limits are
// lines of the pipeline's limits (6 spaces), state the state map's keys
// beyond enabled and dir.
func timerPipeline(t *testing.T, limits, state string) (brokers []string, r *Runner) {
	brokers = kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	keys := fmt.Sprintf("%s    state: {enabled: true, dir: %q%s}", limits, t.TempDir(), state)
	r = startRunner(t, testConfigWith(t, brokers, "g", timerfloodPath(t), "in", "out", "dlq", keys, ""))
	t.Cleanup(func() { r.Stop(context.Background()) })
	return brokers, r
}

// timerOutputs reads out and dlq; a failed test shows what they held.
func timerOutputs(t *testing.T, brokers []string) (out, dlq *kafkatest.Reader) {
	out, dlq = kafkatest.NewReader(t, brokers, "out"), kafkatest.NewReader(t, brokers, "dlq")
	t.Cleanup(func() {
		if t.Failed() {
			dlq.ReadFor(200 * time.Millisecond)
			got := outputLines(out.Recs)
			t.Logf("outputs (%d): %q ... %q", len(got), got[:min(8, len(got))], got[max(0, len(got)-3):])
			for _, r := range dlq.Recs {
				t.Logf("dead letter %q: %s", r.Key, kafkatest.Header(r, "wasmstream.error"))
			}
		}
	})
	return out, dlq
}

// A record that sets a million timers is refused at the first bound it
// reaches — limits.max_outputs (1,000 by default: a timer is an output),
// or state.max_bytes where the outputs' bound is raised past a million —
// and dead-lettered naming it; the partition goes on: the next record sets
// timers that fire. The bound is read from the host's own answers, not
// from the process's heap (which other tests' garbage moves): the guest
// was refused at the timer the bound allows and no later (timerflood
// names it in its error), the pipeline's counters say none of the flood's
// timers was set (wasmstream.timers.set counts the two of the record
// after it) and, for state.max_bytes, that the refusal was the state's
// (wasmstream.state.refused), and the partition's store is empty once the
// two timers have fired: nothing of the flood was kept.
func TestTimerFloodRefused(t *testing.T) {
	t.Parallel()                         // each case owns its in-process broker; asserts no timing
	const timerBytes = 18 + len("flood") // a timer's cost in state.max_bytes (ABI.md §4.2)
	for _, c := range []struct {
		name, limits, state, bound string
		most                       int   // the timers the bound lets the record set before the refused one
		refused                    int64 // wasmstream.state.refused
	}{
		{"max_outputs", "", "", "output limit", 1000, 0},
		{"state.max_bytes", "      max_outputs: 2000000\n      max_output_bytes: 67108864\n", ", max_bytes: 131072", "state.max_bytes", 131072 / timerBytes, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			brokers, r := timerPipeline(t, c.limits, c.state)
			out, dlq := timerOutputs(t, brokers)
			produce(t, brokers, timerRecord("ok", 900, 0, "0", 0), timerRecord("flood", 1000, 1_000_000, "2000", 1),
				timerRecord("ok", 1001, 2, "1500", 100), timerRecord("ok", 1700, 0, "0", 0))
			dlq.ReadUntil(t, time.Minute, "the flood dead-lettered", func(rs []*kgo.Record) bool { return len(rs) >= 1 })
			got := kafkatest.Header(dlq.Recs[0], "wasmstream.error")
			if string(dlq.Recs[0].Key) != "flood" || !strings.Contains(got, c.bound) {
				t.Fatalf("dead letter %q: error %q, want one naming %q", dlq.Recs[0].Key, got, c.bound)
			}
			var at, of int
			_, err := fmt.Sscanf(got[max(0, strings.Index(got, "timer ")):], "timer %d of %d", &at, &of)
			if err != nil || of != 1_000_000 || at > c.most || at < c.most*9/10 {
				t.Fatalf("the flood was refused at timer %d of %d (%v), want at its bound, %d (at most)\n%s", at, of, err, c.most, got)
			}
			want := []string{"ok=record 900", "ok=record 1001", "ok=record 1700", "ok=fired 1500 1700", "ok=fired 1600 1700"}
			out.ReadUntil(t, time.Minute, "the next records and their firings", func(rs []*kgo.Record) bool { return len(rs) >= len(want) })
			out.ReadFor(300 * time.Millisecond)
			if got := outputLines(out.Recs); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("outputs %q, want %q", got, want)
			}
			p := r.Pipelines()[0]
			st := &p.counters.stats
			if set, fired, refused := st.TimersSet.Load(), st.TimersFired.Load(), st.StateRefused.Load(); set != 2 || fired != 2 || refused != c.refused {
				t.Fatalf("timers set %d, fired %d, state puts refused %d; want 2, 2 (none of the flood's), %d", set, fired, refused, c.refused)
			}
			kafkatest.Eventually(t, time.Minute, "the partition's store empty (the fired timers deleted, none of the flood's)", func() bool {
				return p.stateSizes()[0].Data == 0
			})
		})
	}
}

// outputLines is "key=value" of each record.
func outputLines(rs []*kgo.Record) []string {
	var s []string
	for _, r := range rs {
		s = append(s, string(r.Key)+"="+string(r.Value))
	}
	return s
}

// Timers at the ends of time are accepted (ABI.md §4.2 refuses no at)
// and stall nothing. Those at math.MaxInt64 and the millisecond before
// wait while records go on, even past a jump to the latest timestamp a
// record carries through the Kafka client (year 2255: franz-go writes a
// time.Time, whose nanoseconds end in 2262; a later one reaches the
// broker as -1). One at math.MinInt64 is due at once: it fires right
// after the record that set it, in its round.
func TestTimersAtTheEndsOfTime(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers, r := timerPipeline(t, "", "")
	out, _ := timerOutputs(t, brokers)
	const late = int64(9_000_000_000_000) // 2255-03-14, in milliseconds
	produce(t, brokers, timerRecord("far", 1000, 2, "max", -1), timerRecord("far", 2000, 1, "min", 0),
		timerRecord("far", late, 0, "0", 0), timerRecord("far", late+1, 0, "0", 0))
	want := []string{"far=record 1000", "far=record 2000", fmt.Sprintf("far=fired %d 2000", int64(math.MinInt64)),
		fmt.Sprintf("far=record %d", late), fmt.Sprintf("far=record %d", late+1)}
	out.ReadUntil(t, time.Minute, "the records and the due firing", func(rs []*kgo.Record) bool { return len(rs) >= len(want) })
	out.ReadFor(300 * time.Millisecond)
	if got := outputLines(out.Recs); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("outputs %q\nwant %q", got, want)
	}
	if fired := r.Pipelines()[0].counters.stats.TimersFired.Load(); fired != 1 {
		t.Fatalf("%d timers fired, want 1", fired)
	}
}

// A jump of stream time of twenty years makes 3,000 timers due at once
// (one a day over seven years, set by three records): they fire in at
// order, in rounds of one firing at a time (the host lists one due timer
// at a time), each once, and the record after the jump is processed
// after them, within a deadline.
func TestTimersStreamTimeJump(t *testing.T) {
	t.Parallel()                                                   // owns its in-process broker; the deadline is generous
	const day, per = int64(24 * time.Hour / time.Millisecond), 900 // limits.max_outputs: 1,000
	brokers, r := timerPipeline(t, "", "")
	base := int64(1_000_000)
	var rs []*kgo.Record
	for i := range int64(3) {
		rs = append(rs, timerRecord("j", base, per, strconv.FormatInt(base+1+i*per*day, 10), day))
	}
	jump := base + 20*365*day
	rs = append(rs, timerRecord("j", jump, 0, "0", 0), timerRecord("j", jump+1, 0, "0", 0))
	out, _ := timerOutputs(t, brokers)
	start := time.Now()
	produce(t, brokers, rs...)
	const total = 3*per + 5 // the firings and the 5 records' outputs
	out.ReadUntil(t, 2*time.Minute, "the jump's firings and the record after", func(rs []*kgo.Record) bool { return len(rs) >= total })
	t.Logf("%d firings and 5 records in %v", 3*per, time.Since(start).Round(time.Millisecond))
	out.ReadFor(300 * time.Millisecond)
	got := outputLines(out.Recs)
	if len(got) != total || got[3] != fmt.Sprintf("j=record %d", jump) || got[total-1] != fmt.Sprintf("j=record %d", jump+1) {
		t.Fatalf("%d outputs (want %d): %q ... %q", len(got), total, got[:min(5, len(got))], got[max(0, len(got)-3):])
	}
	for i, line := range got[4 : total-1] {
		if want := fmt.Sprintf("j=fired %d %d", base+1+int64(i)*day, jump); line != want {
			t.Fatalf("firing %d: %q, want %q", i, line, want)
		}
	}
	if fired := r.Pipelines()[0].counters.stats.TimersFired.Load(); fired != 3*per {
		t.Fatalf("%d timers fired, want %d", fired, 3*per)
	}
}
