//go:build integration

package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
	"github.com/wasmstream/wasmstream/tests/lookupsrv"
)

// TestPoolSettlesRealKafka: the lookup example (asynchronous HTTP lookups)
// with ordering none and pools of 1 to 4 instances per partition, under
// steady traffic at a fraction of capacity (500 rec/s over 4 partitions) for
// 75 s, with wasmstream as a process. The pools settle on their minimum (4
// instances in all, read from the status lines) and stay there: an instance
// borrowed for a moment of waiting is given back after idle_timeout. The
// resident memory has no upward trend. Every input reaches the output.
func TestPoolSettlesRealKafka(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	srv := lookupsrv.New(t, func(string) time.Duration { return time.Duration(rand.IntN(20)) * time.Millisecond })
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 4, in, out, dlq)
	cfg := writeConfig(t, brokers, n, modules["lookup"], in, out, dlq, "")
	const idle = 2 * time.Second
	replace(t, cfg, "    retry: {max_attempts: 1}", fmt.Sprintf(`    retry: {max_attempts: 1}
    ordering: none
    instances: {min: 1, max: 4, idle_timeout: %v}
    env: {LOOKUP_URL: "%s/users/"}
    async:
      max_in_flight: 32
      http: {allow_hosts: [%q], timeout: 2s}`, idle, srv.URL, srv.Host()))
	p := startProc(t, "run", "--config", cfg)

	const rate, dur, minimum = 500, 75 * time.Second, 4
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl := kafkatest.Client(t, brokers, kgo.ProducerLinger(5*time.Millisecond))
	produced := 0
	prodDone := make(chan error, 1)
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for end := time.Now().Add(dur); time.Now().Before(end); {
			select {
			case <-ctx.Done():
				prodDone <- ctx.Err()
				return
			case <-tick.C:
			}
			recs := make([]*kgo.Record, rate/50)
			for j := range recs {
				recs[j] = &kgo.Record{Topic: in, Key: []byte(fmt.Sprint("u", produced)), Value: []byte(fmt.Sprintf(`{"i":%d}`, produced))}
				produced++
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				prodDone <- err
				return
			}
		}
		prodDone <- nil
	}()

	var rss []int // KiB, one a second
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
sampling:
	for {
		select {
		case err := <-prodDone:
			if err != nil {
				t.Fatalf("producing: %v", err)
			}
			break sampling
		case <-tick.C:
			if !p.alive() {
				t.Fatal("wasmstream exited")
			}
			rss = append(rss, rssKiB(p.cmd.Process.Pid))
		}
	}
	inst := statusInts(p.logText(), "instances")
	outR := kafkatest.NewReader(t, brokers, out)
	outR.ReadUntil(t, time.Minute, "every input in the output", func(rs []*kgo.Record) bool { return len(rs) >= produced })
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	log := p.logText()
	borrowed, released := doneCountKey(log, "status", "borrowed"), doneCountKey(log, "status", "released")

	// The first third is warm-up (the group forms, the start-up backlog may
	// borrow); from then on the pools sit on their minimum: above it only
	// for a moment of waiting plus idle_timeout, and at it most of the time.
	third := len(inst) / 3
	if third < 10 || len(rss) < 30 {
		t.Fatalf("only %d status lines, %d RSS samples", len(inst), len(rss))
	}
	late, atMin, run, longest, peak := inst[third:], 0, 0, 0, 0
	for _, v := range late {
		peak = max(peak, v)
		if v == minimum {
			atMin, run = atMin+1, 0
		} else {
			run++
			longest = max(longest, run)
		}
	}
	med := func(s []int) int {
		v := append([]int(nil), s...)
		sort.Ints(v)
		return v[len(v)/2]
	}
	rt := len(rss) / 3
	mid, last := med(rss[rt:2*rt]), med(rss[2*rt:])
	t.Logf("%d records at %d rec/s over %v: instances after warm-up at the minimum (%d) in %d of %d status lines, peak %d, longest stretch above %d s; borrowed %d, released %d; RSS median %d MiB in the middle third, %d MiB in the last third (%+.1f%%), first %d MiB",
		produced, rate, dur, minimum, atMin, len(late), peak, longest, borrowed, released, mid/1024, last/1024, 100*float64(last-mid)/float64(mid), rss[0]/1024)
	t.Logf("instances per status line: %v", inst)
	if late[len(late)-1] != minimum || atMin*10 < len(late)*9 || longest > int(idle/time.Second)+3 {
		t.Fatalf("the pools did not settle on their minimum of %d instances under light traffic", minimum)
	}
	if float64(last) > float64(mid)*1.10+8*1024 {
		t.Fatalf("resident memory trends upwards: median %d KiB in the middle third, %d KiB in the last third", mid, last)
	}
}

// statusInts returns the values of key on the main pipeline's status lines,
// in order.
func statusInts(log, key string) []int {
	var vs []int
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "msg=status ") || !strings.Contains(line, " pipeline=p ") {
			continue
		}
		if i := strings.Index(line, " "+key+"="); i >= 0 {
			var v int
			fmt.Sscan(line[i+len(key)+2:], &v)
			vs = append(vs, v)
		}
	}
	return vs
}
