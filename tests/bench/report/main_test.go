package main

import (
	"bytes"
	"image/png"
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkUppercasePeers/reference-franz-go-passthrough-2 	 1	 441402247 ns/op	 848897 rec/s	 1.000 x_ref
BenchmarkUppercasePeers/wasmstream-c-guest-2 	 1	2804611144 ns/op	 110684 rec/s	 0.08017 x_ref
BenchmarkUppercasePeers/wasmstream-c-guest-2 	 1	2804611144 ns/op	 110460 rec/s	 0.08001 x_ref
BenchmarkUppercasePeers/kafka-streams-2-threads-2 	 1	3894869177 ns/op	 5.230 cpu_s	 434.4 peak_rss_MiB	 121083 rec/s	 0.08770 x_ref
BenchmarkAsyncIO/wasmstream-async/in_flight_per_instance=4-2 	 1	4344757690 ns/op	 1600 bound_rec/s	 0.8568 of_bound	 1371 rec/s	 14.74 x_blocking
BenchmarkProcessMinimal-2    	  781585	      1520 ns/op	     609 B/op	       9 allocs/op
PASS
`

func TestReport(t *testing.T) {
	rs, err := Parse(strings.NewReader(sample))
	if err != nil || len(rs) != 5 {
		t.Fatalf("%d results, %v", len(rs), err)
	}
	if c := rs[1].Metrics["rec/s"]; c != 110572 {
		t.Fatalf("repeated runs averaged to %v", c)
	}
	var md bytes.Buffer
	Markdown(&md, rs)
	for _, want := range []string{"### UppercasePeers", "| run | records/s | × reference | CPU s | peak RSS MiB |", "| kafka-streams-2-threads | 121,083 | 0.088 | 5.230 | 434.4 |", "### AsyncIO", "| wasmstream-async/in_flight_per_instance=4 | 1,371 | 1,600 | 0.857 | 14.7 |",
		"### Microbenchmarks", "| ProcessMinimal | 1,520 | 609.0 | 9.000 |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	var img bytes.Buffer
	if err := Chart(&img, rs); err != nil {
		t.Fatal(err)
	}
	if cfg, err := png.DecodeConfig(&img); err != nil || cfg.Width < 800 {
		t.Fatalf("chart: %+v %v", cfg, err)
	}
}
