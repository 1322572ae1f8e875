package main

// The demo's ports: the config's metrics and admin listeners (9464 and
// 9465 in config.yaml) and the demo user directory (18089), which the
// lookup pipeline's env and async.http.allow_hosts name. --port-base N
// moves all three to N, N+1 and N+2, so that two demos (or a demo beside
// a running host) can share a machine; the pipelines that name the
// directory's address are rewritten by --set on their keys, by name.

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/wasmstream/wasmstream/scheduler/config"
)

// defaultLookupAddr is where the demo serves its user directory, and the
// address config.yaml's lookup pipeline calls.
const defaultLookupAddr = "127.0.0.1:18089"

// portSets are the --set arguments that move the demo to ports base,
// base+1 and base+2 (metrics, admin, the user directory; base 0: the
// config's), and that point the pipelines of cfg which name from (the
// directory's address they were written for) at lookup; lookup is the
// directory's address after the move.
func portSets(cfg *config.Config, base int, lookup, from string) (sets []string, addr string, err error) {
	addr = lookup
	if base != 0 {
		if base < 1024 || base > 65535-2 {
			return nil, "", fmt.Errorf("--port-base %d: want 1024 to 65533 (the demo listens on it and the two ports after it)", base)
		}
		sets = append(sets, "metrics.listen=127.0.0.1:"+strconv.Itoa(base), "admin.listen=127.0.0.1:"+strconv.Itoa(base+1))
		if lookup == from {
			addr = "127.0.0.1:" + strconv.Itoa(base+2)
		}
	}
	if addr == from || addr == "" {
		return sets, addr, nil
	}
	return append(sets, lookupSets(cfg, from, addr)...), addr, nil
}

// lookupSets point the pipelines whose env or async.http.allow_hosts name
// the address from at addr.
func lookupSets(cfg *config.Config, from, addr string) []string {
	var sets []string
	for _, p := range cfg.Pipelines {
		for _, k := range slices.Sorted(maps.Keys(p.Env)) {
			v := p.Env[k]
			if strings.Contains(v, from) {
				sets = append(sets, fmt.Sprintf("pipelines.%s.env.%s=%s", p.Name, k, strings.ReplaceAll(v, from, addr)))
			}
		}
		hosts, moved := make([]string, len(p.Async.HTTP.AllowHosts)), false
		for i, h := range p.Async.HTTP.AllowHosts {
			hosts[i] = h
			if h == from {
				hosts[i], moved = addr, true
			}
		}
		if moved {
			sets = append(sets, fmt.Sprintf("pipelines.%s.async.http.allow_hosts=%s", p.Name, strings.Join(hosts, ",")))
		}
	}
	return sets
}
