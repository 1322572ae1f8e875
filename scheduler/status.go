package scheduler

import (
	"encoding/json"
	"net/http"
	"time"
)

// StatusSource is what GET /status reads: *Runner.
type StatusSource interface {
	View() []PipelineView
	Versions(pipeline string) []VersionStats
}

// Status is the answer of GET /status: what each pipeline of this host
// runs and what it did since the start. It says what /metrics says (the
// same listener, the same exposure: no key, value or secret), in one JSON
// document a person or a script can read.
type Status struct {
	At        time.Time        `json:"at"`
	Pipelines []PipelineStatus `json:"pipelines"`
}

// PipelineStatus is one pipeline (a retry tier is one too, with RetryOf
// naming its primary).
type PipelineStatus struct {
	Name    string         `json:"name"`
	RetryOf string         `json:"retry_of,omitempty"`
	Module  string         `json:"module"`          // the digest running
	Label   string         `json:"label,omitempty"` // its label (deploy --label)
	Canary  *CanaryStatus  `json:"canary,omitempty"`
	Records RecordCounts   `json:"records"`
	Lag     int64          `json:"lag"`
	Tasks   int            `json:"partitions"`
	Workers map[string]int `json:"instances"`
}

// CanaryStatus is a canary running beside the pipeline's version.
type CanaryStatus struct {
	Module  string `json:"module"`
	Label   string `json:"label,omitempty"`
	Percent int    `json:"percent"`
}

// RecordCounts are a pipeline's counts since the start, by their JSON key:
// the counters of counterTable with a status key (fetched, done, outputs,
// records_dropped, retried, dead_lettered, faults, skipped), then
// in_flight, records fetched and not yet done.
type RecordCounts map[string]int64

// StatusOf builds the status from src.
func StatusOf(src StatusSource, now time.Time) Status {
	st := Status{At: now.UTC(), Pipelines: []PipelineStatus{}}
	for _, v := range src.View() {
		ps := PipelineStatus{Name: v.Name, RetryOf: v.Primary, Module: v.Module.Digest, Label: v.Label, Lag: v.Lag, Tasks: v.Tasks,
			Records: statusCounts(&v.Snapshot),
			Workers: map[string]int{"total": v.Instances, "busy": v.Busy}}
		if v.Primary == "" {
			for _, vs := range src.Versions(v.Name) {
				if vs.Canary {
					ps.Canary = &CanaryStatus{Module: vs.Digest, Label: vs.Label, Percent: vs.Percent}
				}
			}
		}
		st.Pipelines = append(st.Pipelines, ps)
	}
	return st
}

// StatusHandler serves GET /status on the metrics listener.
func StatusHandler(src StatusSource) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(StatusOf(src, time.Now()))
	})
}
