package admin

import (
	"time"

	"github.com/wasmstream/wasmstream/scheduler/registry"
)

// FleetView is what the registry says of a pipeline.
type FleetView struct {
	Deployed string                      `json:"deployed"`          // the digest the fleet should run
	Label    string                      `json:"label,omitempty"`   // its label (deploy --label)
	History  []string                    `json:"history,omitempty"` // before it, oldest first
	At       time.Time                   `json:"at"`
	By       string                      `json:"by"`
	Canary   *registry.Canary            `json:"canary,omitempty"`
	Aborted  string                      `json:"aborted,omitempty"` // why the last canary was aborted
	Hosts    map[string]string           `json:"hosts"`             // live host -> digest it runs (at most MaxListedHosts)
	Failed   map[string]registry.Failure `json:"failed,omitempty"`  // listed host -> the deployment it could not run
	// LiveHosts counts the live hosts running the pipeline; NotListed, those
	// of them not in Hosts.
	LiveHosts int `json:"live_hosts"`
	NotListed int `json:"hosts_not_listed,omitempty"`
}

// MaxListedHosts bounds the hosts a FleetView lists (and so every GET
// /v1/pipelines and `wasmstream processors`): registry.MaxHostsListed.
// The hosts that could not run a deployment come first, then those not on
// the deployed version, then the others, each by name.
const MaxListedHosts = registry.MaxHostsListed

// view is what the registry says of pipeline name: its deployment and the
// live hosts running it, at most MaxListedHosts of them.
func (f *fleetStrategy) view(name string) *FleetView {
	v := &FleetView{Hosts: map[string]string{}}
	if d, ok := f.reg.Deployment(name); ok {
		v.Deployed, v.Label, v.History, v.At, v.By, v.Canary, v.Aborted = d.Digest, d.Label, d.History, d.At, d.By, d.Canary, d.Aborted
	}
	now := time.Now()
	var live []registry.HostStatus
	for _, h := range f.reg.HostsStatus() {
		if _, ok := h.Pipelines[name]; ok && h.Live(now) {
			live = append(live, h)
		}
	}
	rank := func(h registry.HostStatus) int {
		if _, failed := h.Failed[name]; failed {
			return 0
		}
		if h.Pipelines[name] != v.Deployed {
			return 1
		}
		return 2
	}
	v.LiveHosts = len(live)
	live, v.NotListed = registry.RankHosts(live, rank)
	for _, h := range live {
		v.Hosts[h.Host] = h.Pipelines[name]
		if f, ok := h.Failed[name]; ok {
			if v.Failed == nil {
				v.Failed = map[string]registry.Failure{}
			}
			v.Failed[h.Host] = f
		}
	}
	return v
}
