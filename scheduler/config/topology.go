package config

import (
	"fmt"
	"slices"
	"strings"
)

// checkTopology checks how the pipelines fit together; Validate calls it
// once each pipeline is known to be valid on its own, and add records a
// problem.
//
// Internal resources are not shared: a retry topic belongs to its pipeline's
// retry workers (its records carry retry headers only they read), so it may
// be no other pipeline's retry topic, input, output or dead-letter topic;
// consumer groups and transactional ids must differ, or two pipelines would
// split each other's partitions or fence each other's producers. A
// dead-letter topic may be shared, and may be another pipeline's input (a
// pipeline that inspects or repairs failures).
//
// Cycles are refused: when pipelines feed each other (a: x → y, b: y → x,
// or longer rings, dead-letter topics included) a record can go round
// forever. A pipeline with allow_cycles: true may be part of a cycle: it is
// declared to end the loop itself (a hop count, a filter).
func (c *Config) checkTopology(add func(key, format string, args ...any)) {
	c.checkSharedInternals(add)
	c.checkCycles(add)
}

func (c *Config) checkSharedInternals(add func(key, format string, args ...any)) {
	retryOwner := map[string]int{}
	for i := range c.Pipelines {
		for _, t := range c.Pipelines[i].RetryTopics() {
			if j, ok := retryOwner[t]; ok && j != i {
				add(fmt.Sprintf("pipelines[%d].retry.topic_prefix", i), "retry topic %q is also a retry topic of pipelines[%d] (%s): each pipeline needs retry topics of its own (set another retry.topic_prefix)", t, j, c.Pipelines[j].Name)
			} else if !ok {
				retryOwner[t] = i
			}
		}
	}
	for i := range c.Pipelines {
		p := &c.Pipelines[i]
		for _, u := range p.topicUses(i) {
			j, ok := retryOwner[u.topic]
			if !ok || (j == i && u.field != "allowed_outputs") {
				continue // a pipeline's own retry topics vs its other topics: Validate
			}
			add(u.key, "%q is a retry topic of pipelines[%d] (%s): retry topics belong to their pipeline's retry workers", u.topic, j, c.Pipelines[j].Name)
		}
	}
	groups := map[string]int{}
	txnIDs := map[string]int{}
	for i := range c.Pipelines {
		p := &c.Pipelines[i]
		own := []string{c.GroupID(p)}
		if len(p.RetryTopics()) > 0 {
			own = append(own, c.RetryGroupID(p))
		}
		for _, g := range own {
			if j, ok := groups[g]; ok {
				add(fmt.Sprintf("pipelines[%d].group", i), "consumer group %q is also used by pipelines[%d] (%s): each pipeline (and its retry workers, group + \".retry\") needs a group of its own", g, j, c.Pipelines[j].Name)
			} else {
				groups[g] = i
			}
		}
		if p.Guarantee != ExactlyOnce || p.Transactions.ID == "" {
			continue // the default id derives from the group, checked above
		}
		for _, id := range []string{p.Transactions.ID, p.Transactions.ID + ".retry"} {
			if j, ok := txnIDs[id]; ok {
				add(fmt.Sprintf("pipelines[%d].transactions.id", i), "transactional id %q is also used by pipelines[%d] (%s): the two would fence each other", id, j, c.Pipelines[j].Name)
				break
			}
			txnIDs[id] = i
		}
	}
}

// topicUse is one topic named by a pipeline key.
type topicUse struct {
	topic, field, key string
	writes            bool // the pipeline produces to it
}

// topicUses lists the topics pipeline p (pipelines[i]) reads and writes.
func (p *Pipeline) topicUses(i int) []topicUse {
	var out []topicUse
	for j, t := range p.Inputs {
		out = append(out, topicUse{t, "inputs", fmt.Sprintf("pipelines[%d].inputs[%d]", i, j), false})
	}
	if p.Output != "" {
		out = append(out, topicUse{p.Output, "output", fmt.Sprintf("pipelines[%d].output", i), true})
	}
	for j, t := range p.AllowedOutputs {
		out = append(out, topicUse{t, "allowed_outputs", fmt.Sprintf("pipelines[%d].allowed_outputs[%d]", i, j), true})
	}
	if p.DeadLetterTopic != "" {
		out = append(out, topicUse{p.DeadLetterTopic, "dead_letter_topic", fmt.Sprintf("pipelines[%d].dead_letter_topic", i), true})
	}
	return out
}

// edge is pipeline from feeding pipeline to through topic (named by key in
// from's config).
type edge struct {
	to         int
	topic, key string
}

// checkCycles refuses every cycle of pipelines feeding each other that no
// allow_cycles pipeline is part of. A pipeline reading its own output is
// refused by Validate's per-pipeline checks.
func (c *Config) checkCycles(add func(key, format string, args ...any)) {
	n := len(c.Pipelines)
	readers := map[string][]int{}
	for i := range c.Pipelines {
		if c.Pipelines[i].AllowCycles {
			continue
		}
		for _, t := range c.Pipelines[i].Inputs {
			if !slices.Contains(readers[t], i) {
				readers[t] = append(readers[t], i)
			}
		}
	}
	out := make([][]edge, n)
	for i := range c.Pipelines {
		if c.Pipelines[i].AllowCycles {
			continue
		}
		seen := map[int]bool{}
		for _, u := range c.Pipelines[i].topicUses(i) {
			if !u.writes {
				continue
			}
			for _, j := range readers[u.topic] {
				if j != i && !seen[j] {
					seen[j] = true
					out[i] = append(out[i], edge{j, u.topic, u.key})
				}
			}
		}
	}
	for _, scc := range components(out) {
		if len(scc) < 2 {
			continue
		}
		start := slices.Min(scc)
		path := shortestCycle(out, start, scc)
		var b strings.Builder
		b.WriteString(c.Pipelines[start].Name)
		for _, e := range path {
			fmt.Fprintf(&b, " -[%s]-> %s", e.topic, c.Pipelines[e.to].Name)
		}
		add(path[0].key, "%q feeds a cycle of pipelines: %s; a record could go round forever: break the cycle, or set allow_cycles: true on a pipeline of it that ends the loop itself", path[0].topic, b.String())
	}
}

// components returns the strongly connected components of the graph out
// (Tarjan's algorithm, iterative so that no input can exhaust the stack).
func components(out [][]edge) [][]int {
	n := len(out)
	index, low := make([]int, n), make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack, comps = []int{}, [][]int{}
	next := 0
	type frame struct{ v, e int }
	for root := range n {
		if index[root] >= 0 {
			continue
		}
		call := []frame{{root, 0}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			if f.e < len(out[f.v]) {
				w := out[f.v][f.e].to
				f.e++
				if index[w] < 0 {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{w, 0})
				} else if onStack[w] {
					low[f.v] = min(low[f.v], index[w])
				}
				continue
			}
			v := f.v
			call = call[:len(call)-1]
			if len(call) > 0 {
				u := call[len(call)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] == index[v] {
				var comp []int
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp = append(comp, w)
					if w == v {
						break
					}
				}
				comps = append(comps, comp)
			}
		}
	}
	return comps
}

// shortestCycle is a shortest path of edges from start back to start within
// scc (a strongly connected component holding start, so one exists).
func shortestCycle(out [][]edge, start int, scc []int) []edge {
	in := map[int]bool{}
	for _, v := range scc {
		in[v] = true
	}
	prev := map[int]edge{} // node -> the edge that reached it
	from := map[int]int{}  // node -> the node that edge left
	queue := []int{start}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, e := range out[v] {
			if !in[e.to] {
				continue
			}
			if e.to == start {
				path := []edge{e}
				for u := v; u != start; u = from[u] {
					path = append(path, prev[u])
				}
				slices.Reverse(path)
				return path
			}
			if _, seen := prev[e.to]; !seen {
				prev[e.to], from[e.to] = e, v
				queue = append(queue, e.to)
			}
		}
	}
	return nil
}
