//go:build integration

package integration

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestStateRefusedChangelogRecord: the changelog topic's max.message.bytes
// (10,000) is below what state.max_value_bytes lets a guest store
// (512 KiB): three records whose count stores 500,000 bytes (count.pad,
// ~24 KB compressed) among 9,700 good ones. The broker would refuse their
// changelog records.
// Each of the three ends as a failed record — on the dead-letter topic,
// naming the changelog topic's bound — and leaves no state behind; every
// other record is counted exactly (100 per key), the padded ones' keys
// too, under exactly_once and at_least_once. Before, under exactly_once,
// the refused produce aborted the transaction, the record ran again in the
// next one and was refused again: the partition never moved past it (a
// livelock, no dead letter in 2 min); under at_least_once it was
// dead-lettered already, with the producer's error only.
func TestStateRefusedChangelogRecord(t *testing.T) {
	for _, mode := range []string{"exactly_once", "at_least_once"} {
		t.Run(mode, func(t *testing.T) {
			eos := mode == "exactly_once"
			brokers := kafkatest.RealBrokers(t)
			n := names(t)
			in, out, dlq, changelog := n+"-in", n+"-out", n+"-dlq", n+"-changelog"
			const parts = 4
			kafkatest.CreateTopic(t, brokers, parts, in, out, dlq)
			adm := kadm.NewClient(kafkatest.Client(t, brokers))
			ctx, cancel := ctxTimeout(time.Minute)
			defer cancel()
			compact, maxBytes := "compact", "10000"
			if _, err := adm.CreateTopic(ctx, parts, 1, map[string]*string{"cleanup.policy": &compact, "max.message.bytes": &maxBytes}, changelog); err != nil {
				t.Fatal(err)
			}
			keys := ""
			if eos {
				keys = eosKeys
			}
			cfg := writeConfig(t, brokers, n, modules["count"], in, out, dlq, "")
			replace(t, cfg, "    retry: {max_attempts: 1}\n", fmt.Sprintf("    retry: {max_attempts: 1}\n    state: {enabled: true, dir: %q, changelog: %s, max_value_bytes: 524288}\n%s", t.TempDir(), changelog, keys))
			const half = 50 * stateKeys
			kafkatest.Produce(t, brokers, in, half, strconv.Itoa)
			p := startProc(t, "run", "--config", cfg)
			rd := kafkatest.NewReader(t, brokers, out)
			rd.ReadUntil(t, time.Minute, "the first good records counted", func(rs []*kgo.Record) bool { return len(rs) >= half })
			var bad []*kgo.Record
			for i := 0; i < 3; i++ {
				bad = append(bad, &kgo.Record{Topic: in, Key: []byte(fmt.Sprintf("k%d", 3+10*i)), Value: []byte(fmt.Sprint("pad-", i)), Headers: []kgo.RecordHeader{{Key: "count.pad", Value: []byte("500000")}}})
			}
			if err := kafkatest.Client(t, brokers).ProduceSync(ctx, bad...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			kafkatest.Produce(t, brokers, in, half, strconv.Itoa)
			dl := kafkatest.NewReader(t, brokers, dlq)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("host log: %s", tail(p.logText(), 30))
				}
			})
			dl.ReadUntil(t, 2*time.Minute, "three dead letters", func(rs []*kgo.Record) bool { return len(rs) >= len(bad) })
			seen := readCounts(t, rd, 2*half) // every key exactly at 100, none above
			dl.ReadFor(time.Second)
			if len(dl.Recs) != len(bad) {
				t.Errorf("%d dead letters, want %d", len(dl.Recs), len(bad))
			}
			for _, r := range dl.Recs {
				if e := kafkatest.Header(r, "wasmstream.error"); !strings.Contains(e, changelog) || !strings.Contains(e, "max.message.bytes") {
					t.Errorf("dead letter %q=%q: error %q, want it to name %s and its max.message.bytes", r.Key, r.Value, e, changelog)
				}
			}
			dups := 0
			for _, cs := range seen {
				for _, c := range cs {
					dups += c - 1
				}
			}
			if eos && dups > 0 {
				t.Errorf("%d duplicate counts under exactly_once", dups)
			}
			if !p.alive() {
				t.Fatal("the host died")
			}
			if code := p.stop(t, time.Minute); code != 0 {
				t.Fatalf("exit code %d after SIGTERM", code)
			}
			t.Logf("%s: %d good records counted exactly; %d dead letters: %q", mode, 2*half, len(dl.Recs), kafkatest.Header(dl.Recs[0], "wasmstream.error"))
		})
	}
}

// TestRefusedNullKeyToCompactedOutput: under exactly_once, the uppercase
// example writing to a compacted output topic, five records with a null
// key among 3,000 keyed ones: their output, with the same null key, is one
// the broker refuses (INVALID_RECORD). Each of the five fails before its
// output is released — on the dead-letter topic, naming the null key and
// the compacted topic — and every keyed record is in the output exactly
// once. Before, the refused produce aborted every transaction the record
// was in, for ever.
func TestRefusedNullKeyToCompactedOutput(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 3, in, dlq)
	ctx, cancel := ctxTimeout(time.Minute)
	defer cancel()
	compact := "compact"
	if _, err := kadm.NewClient(kafkatest.Client(t, brokers)).CreateTopic(ctx, 3, 1, map[string]*string{"cleanup.policy": &compact}, out); err != nil {
		t.Fatal(err)
	}
	const count = 3000
	var recs []*kgo.Record
	for i := 0; i < count; i++ {
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprintf("k%d", i%stateKeys)), Value: []byte(fmt.Sprintf("v-%06d", i))})
		if i%600 == 300 {
			recs = append(recs, &kgo.Record{Topic: in, Value: []byte(fmt.Sprintf("null-%d", i))})
		}
	}
	if err := kafkatest.Client(t, brokers).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, brokers, n, modules["uppercase"], in, out, dlq, "")
	replace(t, cfg, "    retry: {max_attempts: 1}\n", "    retry: {max_attempts: 1}\n"+eosKeys)
	p := startProc(t, "run", "--config", cfg)
	dl := kafkatest.NewReader(t, brokers, dlq)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("host log: %s", tail(p.logText(), 30))
		}
	})
	dl.ReadUntil(t, 2*time.Minute, "five dead letters", func(rs []*kgo.Record) bool { return len(rs) >= 5 })
	eosCheck(t, kafkatest.NewReader(t, brokers, out), count)
	dl.ReadFor(time.Second)
	if len(dl.Recs) != 5 {
		t.Errorf("%d dead letters, want 5", len(dl.Recs))
	}
	for _, r := range dl.Recs {
		if e := kafkatest.Header(r, "wasmstream.error"); r.Key != nil || !strings.Contains(e, "null key") || !strings.Contains(e, out) {
			t.Errorf("dead letter %q=%q: error %q, want a null-keyed record and an error naming the null key and %s", r.Key, r.Value, e, out)
		}
	}
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	t.Logf("%d keyed records exactly once; %d null-keyed records dead-lettered: %q", count, len(dl.Recs), kafkatest.Header(dl.Recs[0], "wasmstream.error"))
}
