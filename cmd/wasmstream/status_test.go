package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/scheduler"
)

// The status line names the brokers that had errors since the previous
// line (with the count and the last error) and the stalled partitions with
// where their records wait; a healthy pipeline's line has neither key.
func TestStatusLineBrokerErrorsAndStalls(t *testing.T) {
	prev := []scheduler.BrokerErrors{{Broker: "1", Connect: 2}, {Broker: "2", Request: 5}}
	cur := []scheduler.BrokerErrors{
		{Broker: "1", Connect: 2}, // nothing new
		{Broker: "2", Connect: 1, Request: 7, LastError: "i/o timeout"}, // 3 new
		{Broker: "3", Request: 1, LastError: "connection reset by peer"},
	}
	l := statusLine{
		Snapshot: scheduler.Snapshot{Name: "p", Stalled: []scheduler.StalledPartition{
			{Topic: "in", Partition: 1, Reason: scheduler.StallFetching, For: 12400 * time.Millisecond},
			{Topic: "in", Partition: 3, Reason: scheduler.StallProducing, For: 10 * time.Second},
		}},
		brokerErrs: brokerErrorsSince(prev, cur),
	}
	a := fmt.Sprintln(l.attrs()...)
	for _, want := range []string{
		"broker_errors 2: 3 (i/o timeout); 3: 1 (connection reset by peer)",
		"stalled in/1 fetching 12s, in/3 producing 10s",
	} {
		if !strings.Contains(a, want) {
			t.Errorf("status attrs %q lack %q", a, want)
		}
	}
	if s := l.String(); !strings.Contains(s, "broker errors 2: 3") || !strings.Contains(s, "stalled in/1 fetching") {
		t.Errorf("status text %q", s)
	}
	healthy := fmt.Sprintln(statusLine{Snapshot: scheduler.Snapshot{Name: "p"}, brokerErrs: brokerErrorsSince(cur, cur)}.attrs()...)
	if strings.Contains(healthy, "broker_errors") || strings.Contains(healthy, "stalled") {
		t.Errorf("a healthy line: %q", healthy)
	}
}
