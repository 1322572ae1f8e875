package dashboard

import (
	"time"

	"github.com/wasmstream/wasmstream/scheduler/admin"
	"github.com/wasmstream/wasmstream/scheduler/registry"
)

// Fleet is the fleet registry, when the host runs in one:
// *registry.Registry.
type Fleet interface {
	Deployment(pipeline string) (registry.Deployment, bool)
	HostsStatus() []registry.HostStatus
	HostID() string
}

// Canaries is the Source's own view of a canary (*scheduler.Runner), used
// when there is no fleet to say more.
type Canaries interface {
	CanaryDigest(pipeline string) (digest string, percent int)
}

// SetFleet makes the page show the fleet's deployments (with canaries and
// their abort reasons) and its hosts.
func (s *Server) SetFleet(f Fleet) { s.fleet.Store(&f) }

func (s *Server) fleetOf() Fleet {
	if f := s.fleet.Load(); f != nil {
		return *f
	}
	return nil
}

// versionFrame is what a pipeline runs, as the page shows it.
type versionFrame struct {
	Pipeline string       `json:"pipeline"`
	Digest   string       `json:"digest"`
	Label    string       `json:"label,omitempty"`
	Deployed int64        `json:"deployed,omitempty"` // Unix ms
	By       string       `json:"by,omitempty"`       // the host whose admin API took the deploy (fleet)
	Source   string       `json:"source"`             // "fleet" or "host"
	History  []versionRef `json:"history"`            // earlier versions, newest first
	Canary   *canaryFrame `json:"canary,omitempty"`
	Aborted  string       `json:"aborted,omitempty"` // why the last canary was aborted
	// The canary Aborted is about (fleet): for the event log, not the page.
	abortedCanary *canaryFrame
}

type versionRef struct {
	Digest string `json:"digest"`
	Label  string `json:"label,omitempty"`
	// Note says how a version this host saw run ended when the
	// deployment's history does not keep it: "rolled back" or "canary
	// aborted" (kept.go).
	Note string `json:"note,omitempty"`
}

type canaryFrame struct {
	Digest  string `json:"digest"`
	Label   string `json:"label,omitempty"`
	Percent int    `json:"percent"`
	Since   int64  `json:"since,omitempty"` // Unix ms
}

// maxLabelBytes bounds a version's label as shown.
const maxLabelBytes = 128

// label is a version's label as shown: bounded (verlabel already bounds
// what deploy accepts; a stored or registry value is shown cut regardless).
func label(l string) string { return cut(l, maxLabelBytes) }

// versions lists what each pipeline runs: from the fleet's deployment when
// there is one, else from the host's own store.
func (s *Server) versions(names []string, man admin.Manifest) []versionFrame {
	fl := s.fleetOf()
	modLabel := func(d string) string {
		if m := man.Modules[d]; m != nil {
			return label(m.Label)
		}
		return ""
	}
	out := make([]versionFrame, 0, len(names))
	for _, name := range names {
		v := versionFrame{Pipeline: name, History: []versionRef{}}
		var hist []string
		if d, ok := deployment(fl, name); ok {
			v.Digest, v.Deployed, v.By, v.Source, v.Aborted, hist = d.Digest, ms(d.At), d.By, "fleet", cut(d.Aborted, maxErrorShown), d.History
			if v.Label = label(d.Label); v.Label == "" {
				v.Label = modLabel(d.Digest)
			}
			frame := func(c *registry.Canary) *canaryFrame {
				f := &canaryFrame{Digest: c.Digest, Label: label(c.Label), Percent: c.Percent, Since: ms(c.At)}
				if f.Label == "" {
					f.Label = modLabel(c.Digest)
				}
				return f
			}
			if c := d.Canary; c != nil {
				v.Canary = frame(c)
			}
			if c := d.AbortedCanary; c != nil && d.Aborted != "" {
				v.abortedCanary = frame(c)
			}
		} else if ps := man.Pipelines[name]; ps != nil {
			v.Digest, v.Deployed, v.Source, hist = ps.Active, ms(ps.Deployed), "host", ps.History
			v.Label = modLabel(ps.Active)
		} else {
			continue
		}
		if v.Canary == nil {
			if c, ok := s.cfg.Source.(Canaries); ok {
				if d, pct := c.CanaryDigest(name); d != "" {
					v.Canary = &canaryFrame{Digest: d, Label: modLabel(d), Percent: pct}
				}
			}
		}
		for i := len(hist) - 1; i >= 0 && len(v.History) < maxHistory; i-- {
			v.History = append(v.History, versionRef{Digest: hist[i], Label: modLabel(hist[i])})
		}
		out = append(out, v)
	}
	return out
}

func deployment(f Fleet, name string) (registry.Deployment, bool) {
	if f == nil {
		return registry.Deployment{}, false
	}
	return f.Deployment(name)
}

// hostFrame is one host of the fleet.
type hostFrame struct {
	Host      string            `json:"host"`
	Self      bool              `json:"self,omitempty"`
	Live      bool              `json:"live"`
	At        int64             `json:"at"`        // its last status, Unix ms
	Pipelines map[string]string `json:"pipelines"` // name -> digest it runs
	Failed    map[string]string `json:"failed,omitempty"`
}

type hostsFrame struct {
	Hosts     []hostFrame `json:"hosts"`
	NotListed int         `json:"not_listed,omitempty"`
}

// hosts lists the fleet's hosts, at most registry.MaxHostsListed: those
// that could not run a deployment first, then those not heard of lately,
// then the others, each by name.
func (s *Server) hosts(now time.Time) *hostsFrame {
	fl := s.fleetOf()
	if fl == nil {
		return nil
	}
	self := fl.HostID()
	st := fl.HostsStatus()
	rank := func(h registry.HostStatus) int {
		switch {
		case len(h.Failed) > 0:
			return 0
		case !h.Live(now):
			return 1
		}
		return 2
	}
	f := &hostsFrame{Hosts: []hostFrame{}}
	st, f.NotListed = registry.RankHosts(st, rank)
	for _, h := range st {
		hf := hostFrame{Host: cut(h.Host, maxLabelBytes), Self: h.Host == self, Live: h.Live(now), At: ms(h.At), Pipelines: map[string]string{}}
		for p, d := range h.Pipelines {
			if len(hf.Pipelines) == maxKinds {
				break
			}
			hf.Pipelines[cut(p, maxLabelBytes)] = cut(d, 64)
		}
		for p, fl := range h.Failed {
			if hf.Failed == nil {
				hf.Failed = map[string]string{}
			}
			if len(hf.Failed) == maxKinds {
				break
			}
			hf.Failed[cut(p, maxLabelBytes)] = cut(fl.Error, maxErrorShown)
		}
		f.Hosts = append(f.Hosts, hf)
	}
	return f
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
