package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// pipelineSetPrefix starts a --set of a pipeline's key, by the pipeline's
// name: pipelines.<name>.<key>=value. A pipeline is named, not indexed,
// so that a --set keeps meaning the same pipeline when the file's list is
// reordered.
const pipelineSetPrefix = "pipelines."

// pipelineSet is one --set pipelines.<name>.<key>=value, as given.
type pipelineSet struct{ arg, rest, val string }

// splitPipelineSets takes the sets of pipeline keys out of sets: they are
// applied to the file's pipelines once it is read (applyPipelineSets).
func splitPipelineSets(sets []string) (global []string, pipes []pipelineSet) {
	for _, s := range sets {
		key, val, ok := strings.Cut(s, "=")
		if ok && strings.HasPrefix(key, pipelineSetPrefix) {
			pipes = append(pipes, pipelineSet{arg: key, rest: strings.TrimPrefix(key, pipelineSetPrefix), val: val})
			continue
		}
		global = append(global, s)
	}
	return global, pipes
}

// applyPipelineSets sets each pipeline key of sets in raw (the merged
// config as maps): the pipeline is the one whose name the key starts with
// (the longest, as names may hold dots). A pipeline no one has, a key a
// pipeline does not have or a secret is a problem naming the key; the
// value given is never shown.
func applyPipelineSets(raw map[string]any, sets []pipelineSet) Problems {
	if len(sets) == 0 {
		return nil
	}
	list, _ := raw["pipelines"].([]any)
	byName := map[string]map[string]any{}
	var names []string
	for _, el := range list {
		if p, ok := el.(map[string]any); ok {
			if n, ok := p["name"].(string); ok && n != "" {
				byName[n] = p
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	leaves := leafKeys(reflect.TypeOf(Pipeline{}), "")
	secrets := secretLeaves(reflect.TypeOf(Pipeline{}), "")
	maps := mapLeaves(reflect.TypeOf(Pipeline{}))
	var probs Problems
	for _, s := range sets {
		name, key := pipelineOf(s.rest, names)
		_, found := leaves[strings.ReplaceAll(key, ".", "_")]
		if m, entry, ok := strings.Cut(key, "."); ok && maps[m] && entry != "" && !strings.Contains(entry, ".") {
			found = true // an entry of a map, env.LOOKUP_URL
		}
		file, secret := secrets[key]
		switch {
		case name == "":
			probs = append(probs, fmt.Sprintf("--set %s: no pipeline of that name (want pipelines.<name>.<key>=value; the pipelines: %s)", s.arg, strings.Join(names, ", ")))
		case key == "name":
			probs = append(probs, fmt.Sprintf("--set %s: a pipeline's name is what names it here; rename it in the file", s.arg))
		case !found:
			msg := fmt.Sprintf("--set %s: pipeline %s has no key %s (the value given is not shown)", s.arg, name, key)
			if near, ok := closestKey(key, leaves); ok {
				msg += "; did you mean " + pipelineSetPrefix + name + "." + near + "?"
			}
			probs = append(probs, msg)
		case secret:
			probs = append(probs, fmt.Sprintf("--set %s: refused: a secret on the command line is readable by every local user (ps, /proc/<pid>/cmdline); put it in a file only its owner may read (chmod 600) and set %s", s.arg, file))
		default:
			setPath(byName[name], strings.Split(key, "."), s.val)
		}
	}
	return probs
}

// mapLeaves are the keys of t that are maps (env): their entries are set
// as <key>.<entry>.
func mapLeaves(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	eachLeaf(t, "", func(key string, f reflect.StructField) {
		if f.Type.Kind() == reflect.Map {
			out[key] = true
		}
	})
	return out
}

// pipelineOf splits rest ("<name>.<key>") at the longest of names it
// starts with; "" when it starts with none.
func pipelineOf(rest string, names []string) (name, key string) {
	for _, n := range names {
		if strings.HasPrefix(rest, n+".") && len(n) > len(name) {
			name = n
		}
	}
	if name == "" {
		return "", ""
	}
	return name, strings.TrimPrefix(rest, name+".")
}

// setPath sets m's key at path to v, making the sections on the way (a
// value that is no section is replaced: the key below it is what was
// asked for).
func setPath(m map[string]any, path []string, v string) {
	for _, p := range path[:len(path)-1] {
		sub, ok := m[p].(map[string]any)
		if !ok {
			sub = map[string]any{}
			m[p] = sub
		}
		m = sub
	}
	m[path[len(path)-1]] = v
}
