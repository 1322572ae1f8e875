package host

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLookupRecord: the lookup example (one HTTP GET per record to a
// local service answering at once), 256 records in flight on one instance.
// cpu-µs/rec is the process's CPU per record, the service's share included;
// the reference, a Go HTTP client making the same requests with the same
// concurrency, measures that share and the client's, so the difference is
// what the host and the guest add.
func BenchmarkLookupRecord(b *testing.B) {
	const inFlight = 256
	srv := newLookupServer(b, func() time.Duration { return 0 })
	b.Run("reference-go-http-client", func(b *testing.B) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxIdleConns: 1024}}
		sem := make(chan struct{}, inFlight)
		var wg sync.WaitGroup
		b.ReportAllocs()
		cpu0 := cpuTime()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				resp, err := client.Get(fmt.Sprint(srv.URL, "/users/k", i))
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}()
		}
		wg.Wait()
		b.StopTimer()
		b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/rec")
	})
	b.Run("lookup-guest", func(b *testing.B) {
		benchLookupGuest(b, srv, guest(b, "plugins/examples/lookup"))
	})
	b.Run("lookup-rust-guest", func(b *testing.B) {
		benchLookupGuest(b, srv, wt.BuildRustGuest(b, "plugins/examples/rust-lookup"))
	})
}

// benchLookupGuest keeps inFlight records of the lookup guest wasm pending
// on one instance until b.N are done.
func benchLookupGuest(b *testing.B, srv *lookupServer, wasm []byte) {
	const inFlight = 256
	m, _ := loadLookupWasm(b, wasm, srv, Limits{RecordTimeout: 10 * time.Second})
	in := newInstance(b, m)
	recs := make([]*abi.Record, inFlight)
	for i := range recs {
		recs[i] = rec(fmt.Sprint("k", i), "")
	}
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	started, done, polls := 0, 0, 0
	for done < b.N {
		for started < b.N && started-done < inFlight {
			res := in.Process(ctx, recs[started%inFlight], started)
			if res.Status != abi.StatusPending {
				b.Fatalf("record %d: %v %v", started, res.Status, res.Err)
			}
			started++
		}
		<-in.Ready()
		polls++
		for _, d := range in.Poll(ctx, time.Now()) {
			if d.Result.Err != nil || len(d.Result.Outputs) != 1 {
				b.Fatalf("record %v: %+v", d.Tag, d.Result)
			}
			done++
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/rec")
	// The guest calls' own time (guest code and the host functions it
	// calls), apart from the HTTP client and server.
	_, run := in.CallTimes()
	b.ReportMetric(float64(run.Nanoseconds())/1000/float64(b.N), "call-µs/rec")
	// Records decided per Poll: the completions a Poll delivers, which a
	// module with the completions entry takes in one call (ABI.md §10.1).
	b.ReportMetric(float64(done)/float64(polls), "recs/poll")
}
