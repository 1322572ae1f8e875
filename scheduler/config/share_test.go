package config

import (
	"strings"
	"testing"
)

// TestShareCombinations: consume: share loads with ordering: none and
// at_least_once, and every other combination is refused naming its key.
func TestShareCombinations(t *testing.T) {
	with := func(keys string) string { return strings.Replace(good, "limits:", keys+"\n    limits:", 1) }
	c, err := Load(write(t, with("consume: share\n    ordering: none")), nil, nil)
	if err != nil {
		t.Fatalf("consume: share with ordering: none refused: %v", err)
	}
	if p := c.Pipelines[0]; p.Consume != ConsumeShare || p.Share.MaxRecords != 500 {
		t.Fatalf("consume %q, share.max_records %d: want share and the default 500", p.Consume, p.Share.MaxRecords)
	}
	for _, tc := range []struct{ keys, want string }{
		{"consume: share", `pipelines[0].ordering: "partition" with consume: share`},
		{"consume: share\n    ordering: key", `pipelines[0].ordering: "key" with consume: share`},
		{"consume: share\n    ordering: none\n    guarantee: exactly_once", "pipelines[0].guarantee: exactly_once with consume: share"},
		{"consume: share\n    ordering: none\n    max_in_flight: 100\n    share: {max_records: 200}", "pipelines[0].share.max_records: 200: want 1 to max_in_flight (100)"},
		{"consume: share\n    ordering: none\n    share: {max_records: -1}", "pipelines[0].share.max_records: -1"},
		{"consume: queue", `pipelines[0].consume: "queue": want group or share`},
	} {
		_, err := Load(write(t, with(tc.keys)), nil, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error containing %q", tc.keys, err, tc.want)
		}
	}
}
