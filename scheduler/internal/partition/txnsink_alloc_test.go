package partition

import (
	"context"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
)

// nopGate is a TxnGate with no transaction behind it.
type nopGate struct{}

func (nopGate) Enter()       {}
func (nopGate) Leave(int)    {}
func (nopGate) Failed(error) {}

// A stateful record's release into the open transaction (TxnSink.
// deliverOutputs: its output and its changelog output) allocates nothing
// besides what franz-go's Produce allocates for its two records: the
// callback is one static function with the job as the records' Context,
// as a PlainSink's. A closure per output was two allocations a record
// more (2.0 over Produce's). The client's broker never answers (nothing
// listens on its port): the records stay buffered while they are
// counted, and the client's Close fails them (txnOutputAcked). Not
// parallel: the counts are the whole binary's.
func TestTxnOutputsAllocateAsProduce(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ProducerLinger(time.Minute), kgo.MaxBufferedRecords(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, engineOpts{noStart: true})
	s := &TxnSink{Producer: Producer{Config: e.d.Config, Client: cl, Log: e.d.Log}, Gate: nopGate{}}
	e.d.Sink = s // txnOutputAcked finds its sink through the job's task
	t.Cleanup(cl.Close)
	at := time.Now()
	const n = 512
	outs := make([][2]abi.Output, n)
	jobs := make([]job, n)
	prods := make([][2]kgo.Record, n)
	var w worker
	setup := func() {
		for i := range jobs {
			outs[i] = [2]abi.Output{{Key: []byte("k"), Value: []byte("1"), Partition: -1}, {Topic: "p.changelog", Key: []byte("k"), Value: []byte("1"), Partition: 0}}
			jobs[i] = job{t: e.t, r: &kgo.Record{Topic: "in", Offset: int64(i)}}
			jobs[i].outcome.outs = outs[i][:]
			w.outputRecords(&jobs[i])
			prods[i] = [2]kgo.Record{{Topic: "out", Key: []byte("k"), Value: []byte("1")}, {Topic: "p.changelog", Key: []byte("k"), Value: []byte("1")}}
		}
	}
	// count is the least of three counts of the allocations a record of
	// f: another goroutine allocating meanwhile only adds to one.
	count := func(f func(i int)) float64 {
		least := math.Inf(1)
		for range 3 {
			setup()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			for i := range n {
				f(i)
			}
			runtime.ReadMemStats(&m1)
			least = min(least, float64(m1.Mallocs-m0.Mallocs)/n)
		}
		return least
	}
	static := func(*kgo.Record, error) {}
	produce := count(func(i int) {
		cl.Produce(context.Background(), &prods[i][0], static)
		cl.Produce(context.Background(), &prods[i][1], static)
	})
	deliver := count(func(i int) { s.deliverOutputs(&jobs[i], at) })
	t.Logf("a record's release: %.2f allocations; franz-go's two produces: %.2f", deliver, produce)
	if deliver > produce+0.25 {
		t.Fatalf("releasing a record of two outputs into the transaction allocates %.2f times, its two produces %.2f: want no more than theirs", deliver, produce)
	}
}
