//go:build integration

package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestWindowCountRealBroker is TestWindowCountMatchesTheModel on the real
// broker (KAFKA_BROKERS): the tumbling count's read-committed output
// equals the model's under exactly_once and at least once, across a
// restart on an empty state directory.
func TestWindowCountRealBroker(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	for _, g := range []string{"at_least_once", "exactly_once"} {
		t.Run(g, func(t *testing.T) {
			testWindowCount(t, brokers, g, fmt.Sprintf("it-window-%s-%d-", g, time.Now().UnixNano()%1e9))
		})
	}
}
