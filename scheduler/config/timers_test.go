package config

import (
	"strings"
	"testing"
	"time"
)

// timers.idle_advance is off by default, a duration of at least 100ms when
// set, and needs state.enabled; each refusal names the key.
func TestTimersIdleAdvance(t *testing.T) {
	with := func(keys string) string { return strings.Replace(good, "limits:", keys+"\n    limits:", 1) }
	on := "state: {enabled: true}\n    retry: {mode: inline}"
	c, err := Load(write(t, with(on)), nil, nil)
	if err != nil || c.Pipelines[0].Timers.IdleAdvance != 0 {
		t.Fatalf("default: %v %v", c, err)
	}
	c, err = Load(write(t, with(on+"\n    timers: {idle_advance: 30s}")), nil, nil)
	if err != nil || c.Pipelines[0].Timers.IdleAdvance != 30*time.Second {
		t.Fatalf("30s: %v", err)
	}
	for _, tc := range []struct{ keys, want string }{
		{on + "\n    timers: {idle_advance: 50ms}", "pipelines[0].timers.idle_advance: 50ms: want 0 (off) or at least 100ms"},
		{on + "\n    timers: {idle_advance: -1s}", "pipelines[0].timers.idle_advance: -1s"},
		{"timers: {idle_advance: 1s}", "pipelines[0].timers.idle_advance: 1s without state.enabled"},
	} {
		if _, err := Load(write(t, with(tc.keys)), nil, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.keys, err, tc.want)
		}
	}
}
