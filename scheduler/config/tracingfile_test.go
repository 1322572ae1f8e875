package config

import (
	"strings"
	"testing"
)

// Tracing to a file traces failed records and 1% of the healthy ones
// unless sample_ratio says otherwise, and rotates the file at 64 MiB
// keeping three parts; another exporter keeps a ratio of 1. Bad rotation
// values are refused naming their keys.
func TestTracingFileDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tracing string
		ratio   float64
	}{
		{"{exporter: jsonl}", DefaultFileSampleRatio},
		{"{exporter: jsonl, sample_ratio: 1}", 1},
		{"{exporter: jsonl, sample_ratio: 0}", 0},
		{"{exporter: otlp-http, endpoint: '127.0.0.1:4318'}", 1},
		{"{}", 1},
	} {
		c, err := Load(write(t, good+"tracing: "+tc.tracing+"\n"), nil, nil)
		if err != nil {
			t.Fatalf("tracing: %s: %v", tc.tracing, err)
		}
		if *c.Tracing.SampleRatio != tc.ratio || c.Tracing.MaxFileBytes != 64<<20 || c.Tracing.MaxFiles != 3 {
			t.Errorf("tracing: %s: sample_ratio %v, max_file_bytes %d, max_files %d; want %v, 64 MiB, 3", tc.tracing, *c.Tracing.SampleRatio, c.Tracing.MaxFileBytes, c.Tracing.MaxFiles, tc.ratio)
		}
	}
	_, err := Load(write(t, good+"tracing: {exporter: jsonl, max_file_bytes: 1000, max_files: 101}\n"), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "tracing.max_file_bytes: 1000: want at least 65536") || !strings.Contains(err.Error(), "tracing.max_files: 101: want 1 to 100") {
		t.Errorf("bad rotation values: %v", err)
	}
}
