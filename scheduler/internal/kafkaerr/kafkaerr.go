// Package kafkaerr sorts the errors of a poll: which ones a reader of a
// topic up to an offset (a state restore, the registry's catch-up) waits
// out by polling again, and which ones end the read.
package kafkaerr

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// FirstNonRetriable returns the first error of fs that polling again does
// not get past, or nil. A Kafka error the protocol marks retriable is
// passed over (the client retries it itself), and so is context.Canceled
// (a poll cut short: the caller checks its own context); anything else —
// a Kafka error that is not retriable, a dial error, a deadline — is
// returned.
func FirstNonRetriable(fs kgo.Fetches) error {
	var first error
	fs.EachError(func(_ string, _ int32, err error) {
		if first == nil && !errors.Is(err, context.Canceled) && !kerr.IsRetriable(err) {
			first = err
		}
	})
	return first
}
