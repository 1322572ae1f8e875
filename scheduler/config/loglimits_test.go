package config

import (
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/host"
)

// The guest log limits default to the host's and are checked with their keys.
func TestGuestLogLimits(t *testing.T) {
	c, err := Load(write(t, good), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := c.Pipelines[0].Limits
	if l.LogBytesPerSecond != host.DefaultLimits.LogBytesPerSecond || l.LogBurstBytes != host.DefaultLimits.LogBurstBytes {
		t.Fatalf("defaults %d/%d, want the host's %d/%d", l.LogBytesPerSecond, l.LogBurstBytes, host.DefaultLimits.LogBytesPerSecond, host.DefaultLimits.LogBurstBytes)
	}
	_, err = Load(write(t, good+"      log_bytes_per_second: -1\n      log_burst_bytes: 100\n"), nil, nil)
	if err == nil {
		t.Fatal("bad log limits accepted")
	}
	for _, want := range []string{"pipelines[0].limits.log_bytes_per_second: -1: want 1 to 1 GiB", "pipelines[0].limits.log_burst_bytes: 100: want 8 KiB to 1 GiB"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
