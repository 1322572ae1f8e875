package partition

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tracing"
)

// timeSink is a verdictSink that notes the timestamp each delivery is
// given.
type timeSink struct{ at []time.Time }

func (s *timeSink) deliverOutputs(_ *job, at time.Time) { s.at = append(s.at, at) }
func (s *timeSink) deliverFailure(*Task, *kgo.Record, failureCopy, *tracing.Attempt, failure) {
}

// deliverVerdict stamps outputs from Deps.InputTimestamps, resolved once
// from output_timestamp: a record's outputs carry its own timestamp under
// input and the run's clock otherwise; work (no input record) carries the
// clock under both, where reading its record's timestamp would fault.
func TestDeliverVerdictOutputTime(t *testing.T) {
	t.Parallel()
	in := time.UnixMilli(1_000_000)
	clock := time.UnixMilli(2_000_000)
	for _, tc := range []struct {
		name  string
		input bool
		r     *kgo.Record
		want  time.Time
	}{
		{"record/now", false, &kgo.Record{Timestamp: in}, clock},
		{"record/input", true, &kgo.Record{Timestamp: in}, in},
		{"work/now", false, nil, clock},
		{"work/input", true, nil, clock},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tk := &Task{d: &Deps{InputTimestamps: tc.input}}
			j := &job{t: tk, r: tc.r, release: jobRelease{verdict: verdictOutputs}}
			if tc.r == nil {
				j.rare = &jobRare{work: &Work{}}
			}
			var s timeSink
			at := outputTime(clock)
			deliverVerdict(&s, j, &at)
			if len(s.at) != 1 || !s.at[0].Equal(tc.want) {
				t.Fatalf("delivered at %v, want [%v]", s.at, tc.want)
			}
		})
	}
}
