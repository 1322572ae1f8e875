package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/scheduler/config"
)

// An ACL the brokers deny shows up late and vaguely: a consumer group the
// host may not read makes its member retry a join forever, a topic it may
// not describe fails a metadata request with "Not authorized to access
// topics". checkAccess asks the brokers at start what the host's principal
// may do (KIP-430's authorized operations) on each topic and group the
// pipelines use and names what is missing, with the config key that uses
// the resource (README.md, "ACLs the host needs").

// need is what the host does with one resource.
type need struct {
	ops []int8 // kmsg.ACLOperation values
	key string // the first config key naming the resource
}

var opNames = map[int8]string{
	int8(kmsg.ACLOperationRead): "READ", int8(kmsg.ACLOperationWrite): "WRITE", int8(kmsg.ACLOperationCreate): "CREATE",
	int8(kmsg.ACLOperationDescribe): "DESCRIBE", int8(kmsg.ACLOperationAlterConfigs): "ALTER_CONFIGS",
}

// accessNeeds are the operations the pipelines need on each topic and
// group (transactional ids have no authorized-operations query: a denied
// one fails the pipeline's first transaction, naming it), and the fleet
// registry on its topics, named from registryPrefix ("": the config's).
func accessNeeds(cfg *config.Config, registryPrefix string) (topics, groups map[string]*need) {
	topics, groups = map[string]*need{}, map[string]*need{}
	add := func(m map[string]*need, name, key string, ops ...kmsg.ACLOperation) {
		n, ok := m[name]
		if !ok {
			n = &need{key: key}
			m[name] = n
		}
		for _, o := range ops {
			n.ops = append(n.ops, int8(o))
		}
	}
	read, write := kmsg.ACLOperationRead, kmsg.ACLOperationWrite
	for i := range cfg.Pipelines {
		pc := &cfg.Pipelines[i]
		key := func(s string) string { return fmt.Sprintf("pipelines[%d].%s", i, s) }
		for j, t := range pc.Inputs {
			add(topics, t, key(fmt.Sprintf("inputs[%d]", j)), read)
		}
		add(topics, pc.Output, key("output"), write)
		add(topics, pc.DeadLetterTopic, key("dead_letter_topic"), write)
		for j, t := range pc.AllowedOutputs {
			add(topics, t, key(fmt.Sprintf("allowed_outputs[%d]", j)), write)
		}
		for _, t := range pc.RetryTopics() {
			add(topics, t, key("retry"), read, write)
		}
		if pc.State.Enabled {
			add(topics, pc.State.Changelog, key("state.changelog"), read, write)
		}
		add(groups, cfg.GroupID(pc), key("group"), read)
		if len(pc.RetryTopics()) > 0 {
			add(groups, cfg.RetryGroupID(pc), key("group")+" (its retry workers' group)", read)
		}
	}
	if *cfg.Admin.Enabled && *cfg.Admin.Registry {
		if registryPrefix == "" {
			registryPrefix = cfg.RegistryPrefix()
		}
		for _, t := range []string{".modules", ".deploys", ".hosts"} { // registry.Open's topics
			add(topics, registryPrefix+t, "admin.registry_topic_prefix: the fleet registry's topics", read, write)
		}
	}
	return topics, groups
}

// checkAccess returns every operation the brokers deny the host on the
// pipelines' topics and groups, each with the resource and the config key;
// none when all are allowed or the brokers do not say (an older broker, the
// embedded one). err is a failed request.
func checkAccess(ctx context.Context, cl *kgo.Client, cfg *config.Config, registryPrefix string) (denied []string, err error) {
	topics, groups := accessNeeds(cfg, registryPrefix)
	deny := func(kind, name string, n *need, ops []string) {
		denied = append(denied, fmt.Sprintf("%s on %s %q (%s)", strings.Join(ops, ", "), kind, name, n.key))
	}
	missingOps := func(n *need, allowed int32) []string {
		if allowed == math.MinInt32 { // not said
			return nil
		}
		var out []string
		for _, o := range n.ops {
			if allowed&(1<<o) == 0 {
				out = append(out, opNames[o])
			}
		}
		return out
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.IncludeTopicAuthorizedOperations = true
	for _, t := range sortedNames(topics) {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		meta.Topics = append(meta.Topics, rt)
	}
	resp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	for _, rt := range resp.Topics {
		if rt.Topic == nil {
			continue
		}
		n := topics[*rt.Topic]
		if n == nil {
			continue
		}
		switch err := kerr.ErrorForCode(rt.ErrorCode); err {
		case nil:
			if ops := missingOps(n, rt.AuthorizedOperations); len(ops) > 0 {
				deny("topic", *rt.Topic, n, ops)
			}
		case kerr.TopicAuthorizationFailed:
			deny("topic", *rt.Topic, n, []string{"DESCRIBE"})
		}
	}
	// One group a request: a group the host may not describe fails the
	// coordinator lookup of the whole request.
	for _, name := range sortedNames(groups) {
		n := groups[name]
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.IncludeAuthorizedOperations = true
		dg.Groups = []string{name}
		gresp, err := dg.RequestWith(ctx, cl)
		if errors.Is(err, kerr.GroupAuthorizationFailed) {
			deny("group", name, n, []string{"DESCRIBE", "READ"})
			continue
		}
		if err != nil || len(gresp.Groups) != 1 {
			continue // not said: the group's first use will tell
		}
		switch g := gresp.Groups[0]; kerr.ErrorForCode(g.ErrorCode) {
		case nil:
			if ops := missingOps(n, g.AuthorizedOperations); len(ops) > 0 {
				deny("group", name, n, ops)
			}
		case kerr.GroupAuthorizationFailed:
			deny("group", name, n, []string{"DESCRIBE", "READ"})
		}
	}
	sort.Strings(denied)
	return denied, nil
}

func sortedNames(m map[string]*need) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
