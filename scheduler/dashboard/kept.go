package dashboard

import (
	"slices"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/admin"
)

// kept is what the versions panel remembers between samples, for what the
// fleet's deployment record does not say (the sampler's goroutine only):
//
//   - when the stable version was deployed: the record's time is that of
//     its last write, and starting or aborting a canary writes it again;
//   - the versions that ran and left no trace in the record's history: a
//     version rolled back from (a rollback drops it from the history) and
//     an aborted canary (never in it).
//
// What happened before the host started is known only as far as the
// record says: the last aborted canary, and a deploy time only when the
// record was last written by a deploy (else the host's own store's, when
// it ran the same version, else none).
type kept struct {
	p map[string]*keptVersions
}

type keptVersions struct {
	digest, label string
	deployed      int64 // Unix ms, 0: not known
	canary        versionRef
	gone          []versionRef // newest first, at most maxHistory
}

// apply fixes each version's deploy time and adds the versions gone to
// its earlier ones (newest first, then the record's history).
func (k *kept) apply(vs []versionFrame, man admin.Manifest) {
	if k.p == nil {
		k.p = map[string]*keptVersions{}
	}
	for i := range vs {
		v := &vs[i]
		kv := k.p[v.Pipeline]
		if kv == nil {
			kv = &keptVersions{digest: v.Digest, label: v.Label, deployed: firstDeployed(v, man)}
			k.p[v.Pipeline] = kv
			if c := v.abortedCanary; c != nil {
				kv.add(versionRef{Digest: c.Digest, Label: c.Label, Note: "canary aborted"})
			}
		} else {
			if kv.digest != v.Digest {
				if !slices.ContainsFunc(v.History, func(r versionRef) bool { return r.Digest == kv.digest }) {
					kv.add(versionRef{Digest: kv.digest, Label: kv.label, Note: "rolled back"})
				}
				kv.digest, kv.label, kv.deployed = v.Digest, v.Label, v.Deployed
			}
			now := ""
			if v.Canary != nil {
				now = v.Canary.Digest
			}
			switch {
			case kv.canary.Digest != "" && kv.canary.Digest != now && kv.canary.Digest != v.Digest:
				kv.add(kv.canary) // ended without being promoted
			case v.abortedCanary != nil && kv.canary.Digest == "":
				// Begun and aborted between two samples.
				kv.add(versionRef{Digest: v.abortedCanary.Digest, Label: v.abortedCanary.Label, Note: "canary aborted"})
			}
		}
		kv.canary = versionRef{}
		if c := v.Canary; c != nil {
			kv.canary = versionRef{Digest: c.Digest, Label: c.Label, Note: "canary aborted"}
		}
		kv.drop(v.Digest)
		kv.drop(kv.canary.Digest)
		v.Deployed = kv.deployed
		earlier := slices.Clone(kv.gone)
		for _, h := range v.History {
			if len(earlier) == maxHistory {
				break
			}
			if !slices.ContainsFunc(earlier, func(r versionRef) bool { return r.Digest == h.Digest }) {
				earlier = append(earlier, h)
			}
		}
		v.History = earlier
	}
}

// firstDeployed is when the version of a deployment seen for the first
// time was deployed, as far as it is known.
func firstDeployed(v *versionFrame, man admin.Manifest) int64 {
	if v.Source != "fleet" || v.Canary == nil && v.abortedCanary == nil {
		return v.Deployed
	}
	// The record was last written by a canary's start or abort.
	if ps := man.Pipelines[v.Pipeline]; ps != nil && ps.Active == v.Digest {
		return ms(ps.Deployed)
	}
	return 0
}

func (kv *keptVersions) add(r versionRef) {
	kv.drop(r.Digest)
	kv.gone = slices.Insert(kv.gone, 0, r)
	if len(kv.gone) > maxHistory {
		kv.gone = kv.gone[:maxHistory]
	}
}

func (kv *keptVersions) drop(digest string) {
	if digest != "" {
		kv.gone = slices.DeleteFunc(kv.gone, func(r versionRef) bool { return r.Digest == digest })
	}
}

// duration is d as a person writes it: 1m, 1m30s, 1h, 250ms (not 1m0s).
func duration(d time.Duration) string {
	s := d.String()
	if d >= time.Minute && len(s) > 2 && s[len(s)-2:] == "0s" && (s[len(s)-3] < '0' || s[len(s)-3] > '9') {
		s = s[:len(s)-2]
	}
	if d >= time.Hour && len(s) > 2 && s[len(s)-2:] == "0m" && (s[len(s)-3] < '0' || s[len(s)-3] > '9') {
		s = s[:len(s)-2]
	}
	return s
}
