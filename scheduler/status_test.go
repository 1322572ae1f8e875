package scheduler

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/host"
)

type fakeStatus struct{}

func (fakeStatus) View() []PipelineView {
	return []PipelineView{
		{Snapshot: Snapshot{Name: "p", Done: 30, Outputs: 10, Dropped: 20}, Module: host.Info{Digest: "aa"}, Label: "v1.0"},
		{Snapshot: Snapshot{Name: "p-retry", Dropped: 1}, Primary: "p", Module: host.Info{Digest: "aa"}, Label: "v1.0"},
	}
}

func (fakeStatus) Versions(p string) []VersionStats {
	return []VersionStats{{Digest: "aa", Label: "v1.0"}, {Digest: "bb", Label: "v2-rc1", Canary: true, Percent: 10}}
}

// GET /status says per pipeline the version it runs with its label, its
// canary, and its counts with records_dropped.
func TestStatusEndpoint(t *testing.T) {
	rec := httptest.NewRecorder()
	StatusHandler(fakeStatus{}).ServeHTTP(rec, httptest.NewRequest("GET", "/status", nil))
	body := rec.Body.String()
	for _, want := range []string{`"records_dropped": 20`, `"label": "v1.0"`, `"retry_of": "p"`, `"label": "v2-rc1"`, `"percent": 10`} {
		if !strings.Contains(body, want) {
			t.Errorf("/status lacks %s:\n%s", want, body)
		}
	}
	var st Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || len(st.Pipelines) != 2 || st.Pipelines[1].Canary != nil {
		t.Fatalf("%v %+v", err, st)
	}
}
