package source

import (
	"testing"

	"github.com/wasmstream/wasmstream/scheduler/internal/ledger"
)

// TestMemberRecords: share.max_records is split between a host's members
// so that their polls together acquire at most it (the locks a host holds
// stay within share.max_records), the first member taking the odd one;
// under two records a poll there is one member.
func TestMemberRecords(t *testing.T) {
	t.Parallel()
	for n, want := range map[int][]int{1: {1}, 2: {1, 1}, 3: {2, 1}, 500: {250, 250}, 2001: {1001, 1000}} {
		got := MemberRecords(n)
		if len(got) > ledger.MaxShareMembers || len(got) != len(want) {
			t.Fatalf("MemberRecords(%d) = %v, want %v", n, got, want)
		}
		sum := 0
		for i, g := range got {
			if g != want[i] || g < 1 {
				t.Fatalf("MemberRecords(%d) = %v, want %v", n, got, want)
			}
			sum += g
		}
		if sum != n {
			t.Fatalf("MemberRecords(%d) sums to %d", n, sum)
		}
	}
}
