package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// awaitTopics waits until the brokers' metadata lists every topic of ts
// with its partitions, asking every 50 ms until ctx ends. A topic created
// just now reaches a broker's metadata a moment after CreateTopics returns
// (the controller commits it, the brokers learn it next), and in that
// moment a describe, a fetch or a produce sees UNKNOWN_TOPIC_OR_PARTITION:
// ensureTopics returns only once what it created is there, so everything
// started after it finds its topics. What is still missing when ctx ends
// is the error.
func awaitTopics(ctx context.Context, adm *kadm.Client, ts ...string) error {
	if len(ts) == 0 {
		return nil
	}
	// kadm answers a metadata request from the client's cache, which
	// keeps a topic's absence for kgo.MetadataMinAge (5 s): the describe
	// that found the topics missing, just before they were created, would
	// be the answer until then, and every start that creates a topic
	// waited those 5 s. A request for the topics' authorized operations
	// is the one kadm sends to the broker itself, every time.
	direct := kadm.WithAuthorizedOps(ctx)
	missing := ts // what the last answer lacked (before any: all)
	for {
		details, err := adm.ListTopics(direct, ts...)
		if err == nil {
			missing = nil
			for _, t := range ts {
				d, ok := details[t]
				switch {
				case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) || (d.Err == nil && len(d.Partitions) == 0):
					missing = append(missing, t)
				case d.Err != nil:
					return fmt.Errorf("topic %s: %w", t, d.Err)
				}
			}
			if len(missing) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			// The request in flight at the deadline ends with it: the
			// error names what the last answer lacked either way.
			if err != nil && !errors.Is(err, ctx.Err()) {
				return fmt.Errorf("topics %s: %w", strings.Join(missing, ", "), err)
			}
			return fmt.Errorf("topics %s: not in the brokers' metadata by the deadline (%w)", strings.Join(missing, ", "), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
