package kafkaerr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fetches is one fetch with a partition per error, in order.
func fetches(errs ...error) kgo.Fetches {
	ft := kgo.FetchTopic{Topic: "t"}
	for i, err := range errs {
		ft.Partitions = append(ft.Partitions, kgo.FetchPartition{Partition: int32(i), Err: err})
	}
	return kgo.Fetches{{Topics: []kgo.FetchTopic{ft}}}
}

func TestFirstNonRetriable(t *testing.T) {
	dial := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	wrapped := fmt.Errorf("fetch: %w", kerr.TopicAuthorizationFailed)
	for _, c := range []struct {
		name string
		fs   kgo.Fetches
		want error
	}{
		{"none", nil, nil},
		{"no errors", fetches(nil, nil), nil},
		{"retriable", fetches(kerr.NotLeaderForPartition, kerr.UnknownTopicOrPartition), nil},
		{"canceled", kgo.NewErrFetch(context.Canceled), nil},
		{"canceled wrapped", fetches(fmt.Errorf("poll: %w", context.Canceled)), nil},
		{"not retriable", fetches(kerr.TopicAuthorizationFailed), kerr.TopicAuthorizationFailed},
		{"not retriable wrapped", fetches(wrapped), wrapped},
		{"not a Kafka error", fetches(dial), dial},
		{"deadline", kgo.NewErrFetch(context.DeadlineExceeded), context.DeadlineExceeded},
		{"client closed", kgo.NewErrFetch(kgo.ErrClientClosed), kgo.ErrClientClosed},
		{"first of several", fetches(kerr.NotLeaderForPartition, context.Canceled, kerr.OffsetOutOfRange, dial), kerr.OffsetOutOfRange},
		{"across fetches", append(fetches(kerr.NotLeaderForPartition), fetches(dial, kerr.OffsetOutOfRange)...), dial},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := FirstNonRetriable(c.fs); got != c.want {
				t.Errorf("FirstNonRetriable = %v, want %v", got, c.want)
			}
		})
	}
}
