package partition

import (
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/failhdr"
)

// Role is what a pipeline is for, and everything that differs with it
// (RATIONALE.md, "Retries"):
//
//   - primary consumes the configured inputs: anyone can produce there, so
//     no wasmstream.* header on a record is believed, and a record may start
//     as soon as it is fetched;
//   - retryTier consumes its primary's retry topics, in its own group, on a
//     pool that starts empty: the host wrote the failure headers there, so
//     they are decoded and believed, and a record starts only once it is due.
type Role interface {
	// prior is what the host believes of r's earlier attempts, and how many
	// of r's wasmstream.* headers it did not believe. Pure: safe from any
	// goroutine.
	prior(r *kgo.Record) (st failhdr.State, untrusted int)
	// due is when r may start; zero: at once.
	due(r *kgo.Record) time.Time
	// selfSized reports whether the pool's size follows instances: auto.
	selfSized() bool
	// IsRetry reports whether this is a retry tier (metrics label it).
	IsRetry() bool
}

// Primary is the role of a configured pipeline.
type Primary struct{ Auto bool }

// prior of a record on an input topic: nothing is believed. A wasmstream.*
// header there is a forgery (or a leftover of a record copied from a retry
// topic); each is ignored and counted, except wasmstream.redriven.from, the
// mark `dlq redrive` puts on what it sends back. The record is on attempt 1,
// at its own coordinates.
func (Primary) prior(r *kgo.Record) (failhdr.State, int) {
	return failhdr.State{Origin: ownOrigin(r), Attempt: 1}, forgedHeaders(r)
}

// forgedHeaders counts the wasmstream.* headers of a record on an input
// topic (Primary.prior).
func forgedHeaders(r *kgo.Record) int {
	untrusted := 0
	for _, h := range r.Headers {
		if strings.HasPrefix(h.Key, failhdr.Prefix) && h.Key != failhdr.RedrivenFrom {
			untrusted++
		}
	}
	return untrusted
}

func (Primary) due(*kgo.Record) time.Time { return time.Time{} }
func (p Primary) selfSized() bool         { return p.Auto }
func (Primary) IsRetry() bool             { return false }

// RetryTier is the role of a primary's retry pipeline.
type RetryTier struct{}

// prior of a record on a retry topic: the host wrote its headers; they are
// decoded, and the ones that do not decode are counted. Missing coordinates
// fall back to r's own, a missing attempt to 2 (the first retry), a missing
// first failure to now.
func (RetryTier) prior(r *kgo.Record) (failhdr.State, int) {
	st, err := failhdr.Decode(r.Headers)
	untrusted := 0
	if es, ok := err.(failhdr.Errors); ok {
		untrusted = len(es)
	}
	if failhdr.Unusable(err, failhdr.OriginalTopic) || failhdr.Unusable(err, failhdr.OriginalPartition) || failhdr.Unusable(err, failhdr.OriginalOffset) {
		st.Origin = ownOrigin(r) // coordinates come whole from one place
	}
	if st.Attempt < 2 {
		st.Attempt = 2
	}
	if st.FirstFailure.IsZero() {
		st.FirstFailure = time.Now().UTC()
	}
	return st, untrusted
}

// due: when the retry's attempt is due (wasmstream.retry.due); unknown: at once.
func (RetryTier) due(r *kgo.Record) time.Time { return failhdr.DueAt(r.Headers) }
func (RetryTier) selfSized() bool             { return false }
func (RetryTier) IsRetry() bool               { return true }

func ownOrigin(r *kgo.Record) failhdr.Origin {
	return failhdr.Origin{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli()}
}
