package registry

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

func statusRecord(t *testing.T, topic string, h HostStatus) *kgo.Record {
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: topic, Key: []byte(h.Host), Value: b}
}

// TestForgedHostStatuses: statuses written to the hosts topic by someone
// other than the hosts. One dated 2099 is not kept (it would be live until
// then); one whose counts do not add up keeps its pipelines but not its
// counts; one over MaxStatusBytes is not kept; a failure's text is cut to
// MaxFailureText; of 3,000 phantom hosts at most MaxHosts are kept.
func TestForgedHostStatuses(t *testing.T) {
	r, cl := openTest(t, nil)
	r.Start()
	d := digestOf([]byte("v1"))
	now := time.Now().UTC()
	produce(t, cl,
		statusRecord(t, r.Hosts, HostStatus{Host: "future", Pipelines: map[string]string{"p": d}, At: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC),
			Versions: map[string]map[string]Counts{"p": {d: {Records: 1000, Failed: 1000}}}}),
		statusRecord(t, r.Hosts, HostStatus{Host: "absurd", Pipelines: map[string]string{"p": d}, At: now,
			Versions: map[string]map[string]Counts{"p": {d: {Records: 10, Failed: 1000}, "other": {Records: 1e15, Failed: 5, Kinds: map[string]KindCounts{"guest.fail": {Failed: 5, Checked: 9}}}}}}),
		statusRecord(t, r.Hosts, HostStatus{Host: "huge", Pipelines: map[string]string{"p": d}, At: now, Failed: map[string]Failure{"p": {Digest: d, Error: strings.Repeat("x", MaxStatusBytes)}}}),
		statusRecord(t, r.Hosts, HostStatus{Host: "chatty", Pipelines: map[string]string{"p": d}, At: now, Failed: map[string]Failure{"p": {Digest: d, Error: strings.Repeat("é", 2000)}}}),
	)
	var phantoms []*kgo.Record
	for i := range 3000 {
		phantoms = append(phantoms, statusRecord(t, r.Hosts, HostStatus{Host: fmt.Sprintf("phantom-%04d", i), Pipelines: map[string]string{"p": d}, At: now}))
	}
	produce(t, cl, phantoms...)
	kafkatest.Eventually(t, 30*time.Second, "every status read", func() bool { return r.IgnoredStatuses() >= 3+3000-MaxHosts })
	byHost := map[string]HostStatus{}
	for _, h := range r.HostsStatus() {
		byHost[h.Host] = h
	}
	if len(byHost) > MaxHosts {
		t.Errorf("%d statuses kept, over MaxHosts", len(byHost))
	}
	if _, ok := byHost["future"]; ok {
		t.Error("a status dated 2099 kept")
	}
	if _, ok := byHost["huge"]; ok {
		t.Error("a status over MaxStatusBytes kept")
	}
	if h, ok := byHost["absurd"]; !ok || h.Pipelines["p"] != d || len(h.Versions["p"]) != 0 {
		t.Errorf("a status with counts that do not add up: %+v", h)
	}
	if h := byHost["chatty"]; len(h.Failed["p"].Error) > MaxFailureText+len("…") || !strings.HasSuffix(h.Failed["p"].Error, "é…") {
		t.Errorf("a failure's text of %d bytes kept", len(h.Failed["p"].Error))
	}
	t.Logf("%d statuses kept, %d refused or bounded", len(byHost), r.IgnoredStatuses())
	if (HostStatus{At: now.Add(MaxClockSkew + time.Second)}).Live(now) || !(HostStatus{At: now.Add(MaxClockSkew / 2)}).Live(now) {
		t.Error("liveness of statuses dated ahead")
	}
}
