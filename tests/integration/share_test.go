//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
	"github.com/wasmstream/wasmstream/tests/lookupsrv"
)

// Share groups (consume: share, KIP-932) on the real broker: several
// hosts on ONE partition, each running the lookup guest (an I/O-bound
// record: one HTTP call). Each host's LOOKUP_URL ends in its own prefix,
// so the lookup id in an output says which host processed the record.

// shareOut is a lookup output: the input's key, the attempt (the broker's
// delivery count) and the lookup id, "<host>-<key>".
type shareOut struct {
	Key     string
	Attempt int
	Lookup  *struct{ ID string }
}

func decodeShareOut(t *testing.T, r *kgo.Record) (key, host string, attempt int) {
	t.Helper()
	var o shareOut
	if err := json.Unmarshal(r.Value, &o); err != nil || o.Lookup == nil {
		t.Fatalf("output %q: %v", r.Value, err)
	}
	h, k, ok := strings.Cut(o.Lookup.ID, "-")
	if !ok || k != o.Key {
		t.Fatalf("output %q: the lookup belongs to another record", r.Value)
	}
	return o.Key, h, o.Attempt
}

// shareHostConfig writes the config of host h of a share group: the
// lookup guest on srv with h as its lookup prefix.
func shareHostConfig(t *testing.T, brokers []string, n, h string, srv *lookupsrv.Server, maxRecords int) string {
	cfg := writeConfig(t, brokers, n, modules["lookup"], n+"-in", n+"-out", n+"-dlq", "")
	replace(t, cfg, "    retry: {max_attempts: 1}", fmt.Sprintf(`    retry: {max_attempts: 1}
    consume: share
    ordering: none
    share: {max_records: %d}
    instances: {min: 1, max: 1}
    env: {LOOKUP_URL: "%s/users/%s-"}
    async:
      max_in_flight: 64
      http: {allow_hosts: [%q], timeout: 20s}`, maxRecords, srv.URL, h, srv.Host()))
	replace(t, cfg, "      record_timeout: 10s", "      record_timeout: 30s")
	return cfg
}

// shareGroup creates the topics (one input partition) and sets the share
// group's lock time before any member joins (the hosts set where it starts:
// kafka.start_offset, earliest).
func shareGroup(t *testing.T, brokers []string, n string, lock time.Duration) {
	kafkatest.CreateTopic(t, brokers, 1, n+"-in", n+"-out", n+"-dlq")
	kafkatest.SetGroupConfigs(t, brokers, n+".p", "share.record.lock.duration.ms", fmt.Sprint(lock.Milliseconds()))
}

// produceKeys produces one record per key to the input.
func produceKeys(t *testing.T, brokers []string, topic string, keys []string) {
	cl := kafkatest.Client(t, brokers, kgo.ProducerLinger(5*time.Millisecond))
	recs := make([]*kgo.Record, len(keys))
	for i, k := range keys {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(fmt.Sprintf(`{"k":%q}`, k))}
	}
	ctx, cancel := ctxTimeout(time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func keysOf(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return out
}

// joinAll feeds warm-up records (keys "w...") until every host has
// processed one: then every host is a member of the group with its module
// loaded.
func joinAll(t *testing.T, brokers []string, n string, rd *kafkatest.Reader, hosts ...string) {
	t.Helper()
	seen := map[string]bool{}
	batch := 0
	kafkatest.Eventually(t, 90*time.Second, "every host processed a warm-up record", func() bool {
		produceKeys(t, brokers, n+"-in", keysOf(fmt.Sprintf("w%03d-", batch), 30))
		batch++
		rd.ReadFor(500 * time.Millisecond)
		for _, r := range rd.Recs {
			_, h, _ := decodeShareOut(t, r)
			seen[h] = true
		}
		for _, h := range hosts {
			if !seen[h] {
				return false
			}
		}
		return true
	})
}

// TestShareThreeHostsOnePartition: three hosts share one partition; each
// processes a fair share (at least 20%) of 6000 I/O-bound records, none is
// lost, none comes out twice (no host died), and every record is on its
// first delivery.
func TestShareThreeHostsOnePartition(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	shareGroup(t, brokers, n, 10*time.Second)
	srv := lookupsrv.New(t, func(string) time.Duration { return 20 * time.Millisecond })
	hosts := []string{"h1", "h2", "h3"}
	procs := map[string]*proc{}
	for _, h := range hosts {
		procs[h] = startProc(t, "run", "--config", shareHostConfig(t, brokers, n, h, srv, 50))
	}
	rd := kafkatest.NewReader(t, brokers, n+"-out")
	joinAll(t, brokers, n, rd, hosts...)

	const count = 6000
	produceKeys(t, brokers, n+"-in", keysOf("m", count))
	perHost := map[string]int{}
	seen := map[string]int{}
	counted := 0
	rd.ReadUntil(t, 3*time.Minute, "every record's output", func(rs []*kgo.Record) bool {
		for _, r := range rs[counted:] {
			k, h, attempt := decodeShareOut(t, r)
			if !strings.HasPrefix(k, "m") {
				continue
			}
			seen[k]++
			perHost[h]++
			if attempt != 1 {
				t.Fatalf("record %s on attempt %d: no host died, nothing should be redelivered", k, attempt)
			}
		}
		counted = len(rs)
		return len(seen) >= count
	})
	rd.ReadFor(2 * time.Second)
	for _, r := range rd.Recs[counted:] {
		if k, _, _ := decodeShareOut(t, r); strings.HasPrefix(k, "m") {
			seen[k]++
		}
	}
	for _, k := range keysOf("m", count) {
		if seen[k] != 1 {
			t.Fatalf("record %s came out %d times, want once", k, seen[k])
		}
	}
	for _, h := range hosts {
		if share := float64(perHost[h]) / count; share < 0.20 {
			t.Fatalf("host %s processed %d of %d records (%.0f%%), want at least 20%%: %v", h, perHost[h], count, 100*share, perHost)
		}
	}
	for _, h := range hosts {
		if code := procs[h].stop(t, 30*time.Second); code != 0 {
			t.Fatalf("host %s exited %d after SIGTERM", h, code)
		}
	}
	t.Logf("one partition, three hosts, %d records: %v", count, perHost)
}

// TestShareKilledHostsLocksRedelivered: three hosts on one partition with a
// 3 s lock; h1's lookups take 2 s, so it always holds a batch. h1 is
// SIGKILLed right after its first batch: the records it held are
// redelivered to h2 and h3 once their locks lapse (their outputs carry
// attempt 2, the broker's delivery count), nothing is lost, and a record
// comes out twice only if h1 had output it (a duplicate from the killed
// host), at most one batch of them.
func TestShareKilledHostsLocksRedelivered(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	const lock, batch = 3 * time.Second, 50
	shareGroup(t, brokers, n, lock)
	slow := lookupsrv.New(t, func(k string) time.Duration {
		if strings.HasPrefix(k, "h1-m") {
			return 2 * time.Second
		}
		return 20 * time.Millisecond
	})
	fast := lookupsrv.New(t, func(string) time.Duration { return 20 * time.Millisecond })
	h1 := startProc(t, "run", "--config", shareHostConfig(t, brokers, n, "h1", slow, batch))
	startProc(t, "run", "--config", shareHostConfig(t, brokers, n, "h2", fast, batch))
	startProc(t, "run", "--config", shareHostConfig(t, brokers, n, "h3", fast, batch))
	rd := kafkatest.NewReader(t, brokers, n+"-out")
	joinAll(t, brokers, n, rd, "h1", "h2", "h3")

	const count = 6000
	produceKeys(t, brokers, n+"-in", keysOf("m", count))
	seen := map[string][]string{} // key -> hosts that output it
	counted := 0
	redelivered := 0
	tally := func(rs []*kgo.Record) {
		for _, r := range rs[counted:] {
			k, h, attempt := decodeShareOut(t, r)
			if !strings.HasPrefix(k, "m") {
				continue
			}
			seen[k] = append(seen[k], h)
			if attempt > 1 {
				if h == "h1" {
					t.Fatalf("record %s redelivered to the killed host", k)
				}
				redelivered++
			}
		}
		counted = len(rs)
	}
	rd.ReadUntil(t, 2*time.Minute, "h1's first batch", func(rs []*kgo.Record) bool {
		tally(rs)
		for _, hs := range seen {
			if hs[0] == "h1" {
				return true
			}
		}
		return false
	})
	// h1 polled its next batch at once: it holds it for 2 s.
	kafkatest.Eventually(t, 10*time.Second, "h1 holds its second batch", func() bool { return slow.Cur.Load() > 0 })
	h1.kill(t)
	killed := time.Now()
	rd.ReadUntil(t, 3*time.Minute, "every record's output", func(rs []*kgo.Record) bool {
		tally(rs)
		return len(seen) >= count
	})
	rd.ReadFor(2 * time.Second)
	tally(rd.Recs)
	dups := 0
	for _, k := range keysOf("m", count) {
		hs := seen[k]
		switch {
		case len(hs) == 0:
			t.Fatalf("record %s lost", k)
		case len(hs) > 1:
			dups++
			if !strings.Contains(strings.Join(hs, ","), "h1") {
				t.Fatalf("record %s came out %d times from %v: a duplicate not caused by the killed host", k, len(hs), hs)
			}
		}
	}
	if dups > batch {
		t.Fatalf("%d duplicates, want at most one batch (%d): only the killed host's unacknowledged records", dups, batch)
	}
	if redelivered == 0 {
		t.Fatalf("no output on a second delivery: the killed host's locked records were not redelivered")
	}
	t.Logf("SIGKILL of h1 holding a batch: 0 lost, %d duplicates, %d records redelivered (attempt 2) to h2/h3, all done %.1fs after the kill (lock %s)",
		dups, redelivered, time.Since(killed).Seconds(), lock)
}

// TestShareLongCallRenewed: a 2 s lock and lookups of 7 s. h1 holds 20 such
// records; h2 joins while they wait. h1 renews their locks, so h2 is never
// given one: each record comes out once, from h1, on its first delivery,
// and h1 logs no lapsed lock.
func TestShareLongCallRenewed(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	shareGroup(t, brokers, n, 2*time.Second)
	slow := lookupsrv.New(t, func(string) time.Duration { return 7 * time.Second })
	idle := lookupsrv.New(t, nil)
	const count = 20
	produceKeys(t, brokers, n+"-in", keysOf("long", count))
	h1 := startProc(t, "run", "--config", shareHostConfig(t, brokers, n, "h1", slow, 50))
	kafkatest.Eventually(t, 60*time.Second, "h1 waits on every lookup", func() bool { return slow.Cur.Load() == count })
	startProc(t, "run", "--config", shareHostConfig(t, brokers, n, "h2", idle, 50))
	rd := kafkatest.NewReader(t, brokers, n+"-out")
	rd.ReadUntil(t, time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= count })
	rd.ReadFor(3 * time.Second) // a second delivery after a lapsed lock would come out by now
	seen := map[string]bool{}
	for _, r := range rd.Recs {
		k, h, attempt := decodeShareOut(t, r)
		if seen[k] || h != "h1" || attempt != 1 {
			t.Fatalf("record %s: output from %s on attempt %d (seen before: %v): its lock was not kept", k, h, attempt, seen[k])
		}
		seen[k] = true
	}
	if len(seen) != count || idle.Total.Load() != 0 {
		t.Fatalf("%d records out of %d, the idle host made %d lookups", len(seen), count, idle.Total.Load())
	}
	if strings.Contains(h1.logText(), "lock lapsed") {
		t.Fatalf("h1 logged a lapsed lock:\n%s", tail(h1.logText(), 20))
	}
}

// TestShareRefusedCombinations: consume: share is refused with ordering
// partition or key, and with exactly_once, naming the keys: run exits
// non-zero before it touches the broker.
func TestShareRefusedCombinations(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	for _, c := range []struct{ keys, want string }{
		{"consume: share", "pipelines[0].ordering"}, // the default ordering is partition
		{"consume: share\n    ordering: key", "pipelines[0].ordering"},
		{"consume: share\n    ordering: none\n    guarantee: exactly_once", "pipelines[0].guarantee"},
		{"consume: share\n    ordering: none\n    max_in_flight: 100\n    share: {max_records: 500}", "pipelines[0].share.max_records"},
		{"consume: queue", "pipelines[0].consume"},
	} {
		cfg := writeConfig(t, brokers, n, modules["uppercase"], n+"-in", n+"-out", n+"-dlq", "")
		replace(t, cfg, "    retry: {max_attempts: 1}", "    retry: {max_attempts: 1}\n    "+c.keys)
		out, err := exec.Command(binary, "run", "--config", cfg).CombinedOutput()
		code := -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if err == nil || code == 0 || !strings.Contains(string(out), c.want) {
			t.Fatalf("%q: exit %d, want a refusal naming %s:\n%s", c.keys, code, c.want, tail(string(out), 20))
		}
	}
}
