package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The registry's topics are named from admin.registry_topic_prefix, by
// default <kafka.group>.registry: every name the host makes starts with
// <kafka.group>., so one prefixed ACL covers them (README.md, "ACLs the
// host needs"). The default was wasmstream.<kafka.group>, outside that
// prefix: on a cluster with ACLs the host asked for topics nobody had
// granted it, and the error did not name the key that sets them.
//
// A fleet that ran before the change keeps its modules and deployments in
// the old topics, and in a rolling upgrade the hosts not yet upgraded keep
// using them: with the default prefix, Open uses the old topics while they
// exist and the new ones do not (logged, with the way out), so that every
// host of the fleet reads one registry. Topics the host may not describe
// are taken as absent: a principal without ACLs on the old names never used
// them. A prefix set explicitly is the user's and is used as it is.

// resolvePrefix is the prefix Open uses: c.Prefix, or c.OldPrefix where its
// deploys topic exists and c.Prefix's does not.
func resolvePrefix(ctx context.Context, c Config, log *slog.Logger) (string, error) {
	if c.OldPrefix == "" || c.OldPrefix == c.Prefix {
		return c.Prefix, nil
	}
	cl, err := kgo.NewClient(c.Base...)
	if err != nil {
		return "", fmt.Errorf("admin.registry: %w", err)
	}
	defer cl.Close()
	newT, oldT := c.Prefix+".deploys", c.OldPrefix+".deploys"
	// A metadata request of its own, not kadm's ListTopics: that fails as
	// a whole when one topic is denied, and a denied old name is an answer
	// here (absent), not an error.
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false // looking must not create
	for _, t := range []string{newT, oldT} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return "", fmt.Errorf("admin.registry: looking for the registry's topics %s and %s: %w", newT, oldT, err)
	}
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		if rt.Topic != nil {
			codes[*rt.Topic] = rt.ErrorCode
		}
	}
	exists := func(t string) (bool, error) {
		code, ok := codes[t]
		switch err := kerr.ErrorForCode(code); {
		case !ok, errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.TopicAuthorizationFailed):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("admin.registry: topic %s: %w", t, err)
		}
		return true, nil
	}
	hasNew, err := exists(newT)
	if err != nil {
		return "", err
	}
	hasOld, err := exists(oldT)
	if err != nil {
		return "", err
	}
	switch {
	case hasOld && !hasNew:
		log.Warn("admin.registry: the fleet registry keeps the topics of the previous default names, which hold this fleet's deployments: a prefixed ACL on the group does not cover them (README.md, \"ACLs the host needs\"); set admin.registry_topic_prefix to say so, or, to move to the new names, stop every host of the group, deploy again on the new names and delete the old topics",
			"topics", topicsOf(c.OldPrefix), "admin.registry_topic_prefix", c.OldPrefix, "new_default", c.Prefix)
		return c.OldPrefix, nil
	case hasOld:
		log.Info("admin.registry: the topics of the registry's previous default names are no longer read and can be deleted",
			"topics", topicsOf(c.OldPrefix), "registry", c.Prefix)
	}
	return c.Prefix, nil
}

func topicsOf(prefix string) string {
	return prefix + ".modules," + prefix + ".deploys," + prefix + ".hosts"
}

// Prefix is what the registry's topics are named from (Config.Prefix, or
// Config.OldPrefix where the fleet's registry still is).
func (r *Registry) Prefix() string { return strings.TrimSuffix(r.Deploys, ".deploys") }

// explainDenied names the key and the ACLs in an error the brokers gave
// for a registry topic they deny this host's principal.
func explainDenied(err error, prefix string) error {
	if errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) {
		return fmt.Errorf("%w: the brokers deny this host's principal the fleet registry's topics %s: grant it CREATE, READ, WRITE and DESCRIBE on the topic prefix %q (README.md, \"ACLs the host needs\"), or set admin.registry_topic_prefix to a prefix it has them on",
			err, topicsOf(prefix), prefix+".")
	}
	return err
}
