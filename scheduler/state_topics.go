package scheduler

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ensureChangelogs creates the stateful pipelines' changelog topics that
// are missing — compacted, with as many partitions as the pipeline's input
// (a store is an input partition's, and its changelog partition has the
// same number) — and refuses an existing one with another partition
// count. changelogs maps each to its pipeline's index; keys names the
// config key of each topic. Called once the inputs exist.
func (r *Runner) ensureChangelogs(ctx context.Context, adm *kadm.Client, changelogs map[string]int, keys map[string]string) error {
	for topic, i := range changelogs {
		input := r.cfg.Pipelines[i].Inputs[0]
		// An input created just now (kafka.create_topics, the embedded
		// broker) may not be in the metadata yet.
		if err := awaitTopics(ctx, adm, input); err != nil {
			return fmt.Errorf("pipelines[%d].inputs[0]: %w", i, err)
		}
		details, err := adm.ListTopics(ctx, input, topic)
		if err != nil {
			return fmt.Errorf("%s: %w", keys[topic], err)
		}
		in, ok := details[input]
		if !ok || in.Err != nil {
			return fmt.Errorf("pipelines[%d].inputs[0]: topic %s: not found (%v)", i, input, in.Err)
		}
		want := len(in.Partitions)
		if d, ok := details[topic]; ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			if d.Err != nil {
				return fmt.Errorf("%s: topic %s: %w", keys[topic], topic, d.Err)
			}
			if got := len(d.Partitions); got != want {
				return fmt.Errorf("%s: topic %s has %d partitions, its input %s %d: a state store is one input partition's, so they must be equal", keys[topic], topic, got, input, want)
			}
			continue
		}
		compact := "compact"
		resp, err := adm.CreateTopics(ctx, int32(want), -1, map[string]*string{"cleanup.policy": &compact}, topic)
		if err == nil {
			if res, ok := resp[topic]; ok && res.Err != nil && !errors.Is(res.Err, kerr.TopicAlreadyExists) {
				err = res.Err
			}
		}
		if err != nil {
			return fmt.Errorf("%s: create topic %q: %w", keys[topic], topic, err)
		}
		r.log.Info("created topic", "topic", topic, "partitions", want, "cleanup.policy", compact)
	}
	return nil
}
