package commit

import (
	"context"
	"io"
	"log/slog"
	"testing"
)

// heldRecords counts the times its records were given back.
type heldRecords struct{ releases, held int }

func (h *heldRecords) ReleaseAll() int {
	h.releases++
	n := h.held
	h.held = 0
	return n
}

// TestShareAcksFinal: a share pipeline's committer commits nothing, and at
// its stop gives back every record its source still holds, once.
func TestShareAcksFinal(t *testing.T) {
	t.Parallel()
	h := &heldRecords{held: 3}
	c := NewShareAcks(Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, h)
	c.CommitNow(context.Background(), map[string][]int32{"in": {0}}, nil, false)
	c.CommitNow(context.Background(), map[string][]int32{"in": {0}}, nil, true)
	c.CommitNow(context.Background(), nil, nil, false)
	if h.releases != 0 {
		t.Fatalf("records given back on a commit, a revoke or a loss (%d): a share group has no assignment", h.releases)
	}
	c.Final(context.Background(), nil)
	if h.releases != 1 || h.held != 0 {
		t.Errorf("Final gave back %d times, %d still held; want once, none", h.releases, h.held)
	}
}
