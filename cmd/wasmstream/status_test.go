package main

import (
	"bytes"
	"fmt"
	"log/slog"
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

// An idle pipeline's status line is logged once, not again every
// status.interval while nothing changes (a pipeline and its retry tier
// made two idle lines every 10 s); any change, a record in flight or a
// broker error logs it again, and an unchanged idle line is repeated
// every idleStatusEvery so the log still shows the host alive.
func TestIdleStatusNotRepeated(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var st status
	idle := []statusLine{{Snapshot: scheduler.Snapshot{Name: "p", Done: 7}}, {Snapshot: scheduler.Snapshot{Name: "p.retry"}}}
	count := func() int { n := strings.Count(buf.String(), "msg=status"); buf.Reset(); return n }
	t0 := time.Now()
	st.log(log, idle, t0)
	if n := count(); n != 2 {
		t.Fatalf("first tick: %d lines, want 2", n)
	}
	for i := 1; i <= 5; i++ {
		st.log(log, idle, t0.Add(time.Duration(i)*10*time.Second))
	}
	if n := count(); n != 0 {
		t.Errorf("five idle ticks: %d lines, want none", n)
	}
	moved := []statusLine{{Snapshot: scheduler.Snapshot{Name: "p", Done: 9}}, idle[1]}
	st.log(log, moved, t0.Add(time.Minute))
	if n := count(); n != 1 {
		t.Errorf("p done 9: %d lines, want p's", n)
	}
	busy := []statusLine{idle[0], {Snapshot: scheduler.Snapshot{Name: "p.retry", InFlight: 1}}}
	st.log(log, busy, t0.Add(70*time.Second))
	st.log(log, busy, t0.Add(80*time.Second))
	if n := count(); n != 3 {
		t.Errorf("p back at done 7, p.retry with a record in flight twice: %d lines, want 3", n)
	}
	st.log(log, []statusLine{idle[0], {Snapshot: scheduler.Snapshot{Name: "p.retry"}, brokerErrs: "1: 1 (refused)"}}, t0.Add(90*time.Second))
	if n := count(); n != 1 {
		t.Errorf("a broker error: %d lines, want 1", n)
	}
	st.log(log, idle, t0.Add(100*time.Second)) // p.retry quiet again: said once
	st.log(log, idle, t0.Add(70*time.Second+idleStatusEvery))
	if n := count(); n != 2 {
		t.Errorf("p.retry idle again, then %v after p's last line: %d lines, want 2", idleStatusEvery, n)
	}
}
