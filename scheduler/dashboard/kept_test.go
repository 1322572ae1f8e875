package dashboard

import (
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/admin"
)

func TestDashboardDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		time.Minute: "1m", 90 * time.Second: "1m30s", time.Hour: "1h", 90 * time.Minute: "1h30m", time.Hour + time.Second: "1h0m1s",
		10 * time.Second: "10s", 250 * time.Millisecond: "250ms", 10 * time.Minute: "10m", 0: "0s",
	} {
		if got := duration(d); got != want {
			t.Errorf("duration(%v) = %q, want %q", time.Duration(d), got, want)
		}
	}
}

// TestDashboardKeptFirstSight: a deployment first seen while a canary runs
// (the record's time is the canary's) shows the host's own deploy time of
// the same version, else none; an aborted canary in the record is listed
// as an earlier version.
func TestDashboardKeptFirstSight(t *testing.T) {
	t.Parallel()
	deployed := time.UnixMilli(1_000_000)
	man := admin.Manifest{Pipelines: map[string]*admin.PipelineState{"a": {Active: "v1", Deployed: deployed}}}
	vs := []versionFrame{
		{Pipeline: "a", Digest: "v1", Source: "fleet", Deployed: 5_000_000, Canary: &canaryFrame{Digest: "v3"}, abortedCanary: &canaryFrame{Digest: "v2"}},
		{Pipeline: "b", Digest: "v1", Source: "fleet", Deployed: 5_000_000, Canary: &canaryFrame{Digest: "v3"}},
		{Pipeline: "c", Digest: "v1", Source: "fleet", Deployed: 5_000_000, History: []versionRef{{Digest: "v0"}}},
	}
	var k kept
	k.apply(vs, man)
	if vs[0].Deployed != deployed.UnixMilli() || vs[1].Deployed != 0 || vs[2].Deployed != 5_000_000 {
		t.Errorf("deployed %d, %d, %d; want the store's, none, the record's", vs[0].Deployed, vs[1].Deployed, vs[2].Deployed)
	}
	if h := vs[0].History; len(h) != 1 || h[0].Digest != "v2" || h[0].Note != "canary aborted" {
		t.Errorf("earlier versions of a: %+v", h)
	}
}
