package partition

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
)

// drainSpareJobs empties spareJobs, so that what a test finds there is
// what it gave back.
func drainSpareJobs() {
	for spareJob() != nil {
	}
}

// reusedOf counts the jobs of js that spareJobs gives back, and fails if
// one comes back not zeroed.
func reusedOf(t *testing.T, js []*job) int {
	t.Helper()
	mine := make(map[*job]bool, len(js))
	for _, j := range js {
		mine[j] = true
	}
	n := 0
	for j := spareJob(); j != nil; j = spareJob() {
		if !reflect.ValueOf(j).Elem().IsZero() {
			t.Fatalf("a job given back is not blank: %+v", j)
		}
		if mine[j] {
			n++
		}
	}
	return n
}

// outputJob is a job decided ok with one output, as succeeded leaves it.
func outputJob(w *worker, tk *Task, off int64) *job {
	j := w.allocJob()
	j.t, j.r, j.attempt = tk, &kgo.Record{Topic: "in", Offset: off, Value: []byte("v")}, 1
	j.release.verdict = verdictOutputs
	j.outcome.outs = []abi.Output{{Value: []byte("V"), Partition: -1}}
	return j
}

// A record's job goes back to the next records (spareJobs) once its record
// is done and nothing holds it: the last acknowledgement of its outputs
// (PlainSink), the last of its outputs' answers and its release (TxnSink),
// or its filtering. A job whose produce failed, or that has a jobRare, is
// not given back. On the broker of kfake. One P, so that the
// producer's callbacks give to the pool the test reads (sync.Pool is per
// P); the race detector's pool drops a quarter of what it is given, so
// the test asks for half of the jobs back.
func TestDoneJobsAreReused(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	const n = 64

	e := newEngine(t, engineOpts{noStart: true})
	p := Producer{Config: e.d.Config, Client: cl, Log: e.d.Log, Background: e.d.Background, Quit: make(chan struct{}), Stopped: new(atomic.Bool)}
	w := &worker{t: e.t}
	for _, tc := range []struct {
		name string
		sink Sink
	}{
		{"at_least_once", &PlainSink{Producer: p}},
		{"exactly_once", &TxnSink{Producer: p, Gate: nopGate{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.d.Sink = tc.sink
			drainSpareJobs()
			js := make([]*job, n)
			for i := range js {
				js[i] = outputJob(w, e.t, int64(i))
			}
			tc.sink.deliver(js)
			if err := cl.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := reusedOf(t, js); got < n/2 {
				t.Fatalf("%d of %d jobs whose outputs were acknowledged were given back, want most", got, n)
			}

			// Not given back: jobs with a jobRare (a kept trace's
			// have one: outputRecords).
			drainSpareJobs()
			rare := make([]*job, n)
			for i := range rare {
				rare[i] = outputJob(w, e.t, int64(n+i))
				rare[i].rareFields()
			}
			tc.sink.deliver(rare)
			if err := cl.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := reusedOf(t, rare); got != 0 {
				t.Fatalf("%d jobs with a jobRare were given back", got)
			}
		})
	}

	// Under exactly_once a job whose output's produce failed is not given
	// back (its transaction aborts).
	t.Run("exactly_once produce failed", func(t *testing.T) {
		s := &TxnSink{Producer: p, Gate: nopGate{}}
		e.d.Sink = s
		drainSpareJobs()
		j := outputJob(w, e.t, 2*n)
		j.prepareOutputs("out", time.Now())
		j.remaining.Store(2) // its output and its release
		j.outcome.out1.Context = j
		txnOutputAcked(&j.outcome.out1, errors.New("refused"))
		j.txnAnswered() // its release
		if got := reusedOf(t, []*job{j}); got != 0 {
			t.Fatal("a job whose produce failed was given back")
		}
	})

	// A record that succeeded without outputs gives its job back at once.
	t.Run("filtered", func(t *testing.T) {
		drainSpareJobs()
		js := make([]*job, n)
		for i := range js {
			js[i] = outputJob(w, e.t, int64(3*n+i))
			js[i].release.verdict, js[i].outcome.outs = verdictDone, nil
		}
		(&PlainSink{Producer: p}).deliver(js)
		if got := reusedOf(t, js); got < n/2 {
			t.Fatalf("%d of %d filtered records' jobs were given back, want most", got, n)
		}
	})
}

// Under exactly_once a record's place is reserved at enqueue without a
// job (a poll's records are reserved at once, tens of thousands a
// partition): its job is made when a worker claims it, with the worker's
// allocator (allocJob: a done record's job), once — a record handed back
// and claimed again gets the same job.
func TestReservedPlacesHoldNoJob(t *testing.T) {
	rl := &releaser{sk: &recordingSink{}, byOffset: true}
	rs := recs(0, "a", "b", "c")
	rl.reserve(rs, func(*kgo.Record) bool { return true })
	for i := range rl.q.Len() {
		if p := rl.q.At(i); p.j != nil || p.r != rs[i] {
			t.Fatalf("place %d after reserve: %+v, want record %d and no job", i, *p, i)
		}
	}
	made := 0
	alloc := func() *job { made++; return new(job) }
	j := rl.claim(rs[1], alloc)
	if made != 1 || j.r != rs[1] || !j.release.ordered || rl.q.At(1).j != j {
		t.Fatalf("claim: %d jobs made, job %+v in place %+v", made, j, *rl.q.At(1))
	}
	if again := rl.claim(rs[1], alloc); again != j || made != 1 {
		t.Fatalf("claimed again: a new job (%d made)", made)
	}
	if rl.q.At(0).j != nil || rl.q.At(2).j != nil {
		t.Fatal("claiming one record made the jobs of others")
	}
}
