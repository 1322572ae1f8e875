//go:build integration

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/windowmodel"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// The close-to-visible phase's pace: closeRate records a second for
// closeFor (a second in the smoke run), then the closing records.
const closeRate = 1000

func closeFor() time.Duration {
	if smoke() {
		return time.Second
	}
	return 3 * time.Second
}

// closePhase is one close-to-visible phase's input: the paced records,
// the window they fill, and each partition's closing record.
type closePhase struct {
	paced   []*kgo.Record
	closers []*kgo.Record // by partition
	start   int64         // the window [start, start+winSize) the closers close
	want    map[string]int64
}

// planClose appends a phase's records to in (advancing its clock) and
// returns them. The paced records' event time climbs evenly from in.clock
// to close-1, close being the end + grace of the window [start, start +
// size) that starts after in.clock, so stream time moves in small steps
// (Kafka Streams' store with its default retention loses windows a jump
// closes: makeWindowedInput) and no window of start closes before the
// closing records, one per partition at close exactly. Those close the
// windows of start, nothing else: the paced records closed the ones
// before on the way. want is the model's count of each key's window of
// start.
func planClose(in *windowedInput) closePhase {
	count := int(closeFor().Seconds() * closeRate)
	ph := closePhase{start: (in.clock/winSize + 1) * winSize, want: map[string]int64{}}
	closeAt := ph.start + winSize + winGrace
	add := func(key string, ts int64) *kgo.Record {
		p := keyPartition(key)
		in.byPart[p] = append(in.byPart[p], windowmodel.Record{Key: key, TS: ts})
		return &kgo.Record{Topic: in.topic, Partition: int32(p), Key: []byte(key), Value: []byte("clicked"), Timestamp: time.UnixMilli(ts)}
	}
	keys := max(1, in.keys/10) // a tenth of the keys: a window counts one record or a few
	for i := range count {
		ts := in.clock + int64(i+1)*(closeAt-1-in.clock)/int64(count)
		ph.paced = append(ph.paced, add(fmt.Sprintf("user-%05d", i%keys), ts))
	}
	ph.closers = make([]*kgo.Record, partitions)
	for j, left := 0, partitions; left > 0; j++ {
		key := fmt.Sprintf("close-%d", j)
		if p := keyPartition(key); ph.closers[p] == nil {
			ph.closers[p] = add(key, closeAt)
			left--
		}
	}
	in.clock = closeAt
	in.model()
	for _, recs := range in.byPart {
		for _, w := range windowmodel.Tumbling(recs, winSize, winGrace).Final {
			if w.Start == ph.start {
				ph.want[w.Key] = w.Count
			}
		}
	}
	return ph
}

// keyPartition is key's partition by Kafka's default partitioner
// (murmur2), where the input places it.
func keyPartition(key string) int {
	return keyPartitioner.Partition(&kgo.Record{Key: []byte(key)}, partitions)
}

var keyPartitioner = kgo.StickyKeyPartitioner(nil).ForTopic("")

// closeLatency is the close-to-visible phase after a drain (issue 58 §5):
// records at closeRate a second for closeFor, then one closing record per
// partition, each produced at a known time; a window's latency is from the
// production of its partition's closing record (its end + grace reached)
// to its final result being read read_committed from out by a consumer
// tailing it. It returns the p50 and p99 over the windows those records
// closed, and their number; each result must carry the model's count.
// The phase's records stay in the input (planClose): the runs after this
// one read them in their drain.
func closeLatency(b *testing.B, brokers []string, in *windowedInput, out string) (p50, p99 time.Duration, windows int) {
	ph := planClose(in)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seen := tailWindows(ctx, b, brokers, out, ph.start)
	defer func() { cancel(); <-seen.ended }()
	cl := kafkatest.Client(b, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	produced := func(_ *kgo.Record, err error) {
		if err != nil {
			b.Error(err)
		}
	}
	begin := time.Now()
	for i, r := range ph.paced {
		time.Sleep(time.Until(begin.Add(time.Duration(i) * time.Second / closeRate)))
		cl.Produce(ctx, r, produced)
	}
	time.Sleep(time.Until(begin.Add(time.Duration(len(ph.paced)) * time.Second / closeRate)))
	sent := make([]time.Time, partitions)
	for p, r := range ph.closers {
		sent[p] = time.Now()
		cl.Produce(ctx, r, produced)
	}
	got := seen.wait(ctx, b, len(ph.want))
	var lat []time.Duration
	for key, n := range ph.want {
		r, ok := got[key]
		if !ok {
			b.Fatalf("close-to-visible: no final result for %s's window at %d", key, ph.start)
		}
		if r.count != n {
			b.Errorf("close-to-visible: %s's window at %d counted %d, the model %d", key, ph.start, r.count, n)
		}
		lat = append(lat, r.at.Sub(sent[keyPartition(key)])) // the input's partition: its closing record closed the window
	}
	if len(got) != len(ph.want) {
		b.Errorf("close-to-visible: %d windows at %d read, the model closes %d", len(got), ph.start, len(ph.want))
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100], len(lat)
}

// windowSeen is a final result as the tailing consumer read it.
type windowSeen struct {
	at    time.Time
	count int64
}

// windowTail collects, from a consumer tailing a windowed count's output,
// the first final result of each key's window of one start.
type windowTail struct {
	mu    sync.Mutex
	got   map[string]windowSeen
	err   error
	ended chan struct{}
}

// tailWindows starts reading out read_committed from its end offsets (in
// a goroutine that ends with ctx or at the first unreadable result),
// keeping the results of windows at start, the output's key its window's
// key: wasmstream's value "<start> <end> <count>" or Kafka Streams'
// {"start":S,"end":E,"count":N}.
func tailWindows(ctx context.Context, b *testing.B, brokers []string, out string, start int64) *windowTail {
	ends, err := kadm.NewClient(kafkatest.Client(b, brokers)).ListEndOffsets(ctx, out)
	if err != nil {
		b.Fatalf("end offsets of %s: %v", out, err)
	}
	from := map[string]map[int32]kgo.Offset{out: {}}
	ends.Each(func(o kadm.ListedOffset) { from[out][o.Partition] = kgo.NewOffset().At(o.Offset) })
	rd := kafkatest.Client(b, brokers, kgo.ConsumePartitions(from), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	t := &windowTail{got: map[string]windowSeen{}, ended: make(chan struct{})}
	go func() {
		defer close(t.ended)
		for ctx.Err() == nil {
			fs := rd.PollFetches(ctx)
			now := time.Now()
			t.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				w, err := parseWindow(r.Value)
				if err != nil && t.err == nil {
					t.err = fmt.Errorf("output %q: %w", r.Value, err)
				}
				if _, dup := t.got[string(r.Key)]; err == nil && w.Start == start && !dup {
					t.got[string(r.Key)] = windowSeen{at: now, count: w.Count}
				}
			})
			failed := t.err != nil
			t.mu.Unlock()
			if failed {
				return
			}
		}
	}()
	return t
}

// wait returns what the tail read once it holds n windows, failing the
// benchmark if ctx ends first or a result was unreadable. The tail keeps
// reading until ctx ends (a duplicate or an extra window is then seen by
// the caller's count only if it came before).
func (t *windowTail) wait(ctx context.Context, b *testing.B, n int) map[string]windowSeen {
	for {
		t.mu.Lock()
		got, err := len(t.got), t.err
		t.mu.Unlock()
		if err != nil {
			b.Fatal(err)
		}
		if got >= n {
			t.mu.Lock()
			defer t.mu.Unlock()
			return maps.Clone(t.got)
		}
		select {
		case <-ctx.Done():
			b.Fatalf("close-to-visible: %d of %d final results read read_committed within the deadline", got, n)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// parseWindow reads a windowed count's output value: wasmstream's
// "<start> <end> <count>" or Kafka Streams' JSON.
func parseWindow(v []byte) (windowmodel.Window, error) {
	var w windowmodel.Window
	if len(v) > 0 && v[0] == '{' {
		var j struct{ Start, End, Count int64 }
		err := json.Unmarshal(v, &j)
		return windowmodel.Window{Start: j.Start, End: j.End, Count: j.Count}, err
	}
	_, err := fmt.Sscanf(string(v), "%d %d %d", &w.Start, &w.End, &w.Count)
	return w, err
}
