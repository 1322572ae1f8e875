//go:build integration

package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestTopicsDeletedAtEnd: the topics a test creates (kafkatest.CreateTopic)
// and those named with its unique prefix (names: what the host makes for
// it — retry, changelog, registry topics) are deleted when it ends, and
// not before: a subtest's topics are there while it runs, gone once it
// returned. Before, no test deleted a topic: a run of the suite left some
// 1,100 partitions on the broker, which stalled once at that size.
func TestTopicsDeletedAtEnd(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	adm := kadm.NewClient(kafkatest.Client(t, brokers))
	exist := func(topics ...string) []string {
		t.Helper()
		ctx, cancel := ctxTimeout(30 * time.Second)
		defer cancel()
		listed, err := adm.ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var there []string
		for _, topic := range topics {
			if slices.Contains(listed.Names(), topic) {
				there = append(there, topic)
			}
		}
		return there
	}
	var topics []string
	t.Run("makes topics", func(t *testing.T) {
		n := names(t)
		in, out := n+"-in", n+"-out"
		kafkatest.CreateTopic(t, brokers, 2, in, out)
		// As the host makes one for a pipeline of group n.
		hostMade := n + ".p.retry.1s"
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, hostMade); err != nil {
			t.Fatal(err)
		}
		topics = []string{in, out, hostMade}
		if there := exist(topics...); len(there) != len(topics) {
			t.Fatalf("while the test runs, only %v of %v exist", there, topics)
		}
	})
	// Deleting is asynchronous on the broker: the topics leave its
	// metadata a moment after DeleteTopics is answered.
	kafkatest.Eventually(t, 30*time.Second, "the subtest's topics deleted", func() bool { return len(exist(topics...)) == 0 })
}
