package scheduler

import "github.com/wasmstream/wasmstream/scheduler/internal/offsets"

// EncodeDoneOffsets encodes done offsets (ascending, above base) as commit
// metadata for commit offset base within maxLen bytes, and returns how many it
// covers. For tools and tests; the pipeline does the same on every commit.
func EncodeDoneOffsets(base int64, done []int64, maxLen int) (string, int) {
	return offsets.EncodeDone(base, done, maxLen)
}

// DecodeDoneOffsets decodes commit metadata for commit offset base and
// returns how many done offsets it records.
func DecodeDoneOffsets(meta string, base int64) (int, error) {
	d, err := offsets.DecodeDone(meta, base)
	return d.Count(), err
}
