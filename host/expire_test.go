package host

import (
	"context"
	"testing"
	"time"
)

// The instance's bound on its pending records' deadlines (earliest) goes
// stale when the record that set it is decided: Poll must then find no
// record expired early, make the bound exact again, and fail the record
// that is left at its own deadline, not before.
func TestExpireAfterAStaleBound(t *testing.T) {
	srv := newLookupServer(t, func() time.Duration { return 0 })
	m, e := loadLookup(t, srv, Limits{RecordTimeout: 2 * time.Second})
	in := newInstance(t, m)
	ctx := context.Background()
	in.Process(ctx, rec("first", ""), "first")
	first := in.NextDeadline()
	time.Sleep(20 * time.Millisecond)
	in.Process(ctx, rec("leak", "leak"), "leak") // never decides
	var leak time.Time
	for _, st := range in.waiting.recs {
		if st.tag == "leak" {
			leak = st.deadline
		}
	}
	if leak.IsZero() || !leak.After(first) {
		t.Fatalf("want the leaking record pending with a later deadline than the first (%v), got %v", first, leak)
	}
	if got := drain(t, in, 1, time.Second)["first"]; got.Err != nil {
		t.Fatalf("first: %v", got.Err)
	}
	if nd := in.NextDeadline(); nd.After(leak) {
		t.Fatalf("NextDeadline %v is after the pending record's deadline %v", nd, leak)
	}
	for _, d := range in.Poll(ctx, first.Add(time.Millisecond)) {
		t.Fatalf("past the stale bound, before any deadline: %v finished (%+v)", d.Tag, d.Result)
	}
	if nd := in.NextDeadline(); !nd.Equal(leak) {
		t.Fatalf("after looking, NextDeadline is %v, want the pending record's deadline %v", nd, leak)
	}
	for _, d := range in.Poll(ctx, leak.Add(-time.Millisecond)) {
		t.Fatalf("before its deadline: %v finished (%+v)", d.Tag, d.Result)
	}
	var failed bool
	for _, d := range in.Poll(ctx, leak) {
		if f := d.Result.Fault(); d.Tag == "leak" && f != nil && f.Kind == FaultDeadline {
			failed = true
		}
	}
	if !failed || in.Pending() != 0 {
		t.Fatalf("at its deadline the record did not fail (pending %d)", in.Pending())
	}
	waitZero(t, e)
}
