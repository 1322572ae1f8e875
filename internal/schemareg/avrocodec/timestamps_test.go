package avrocodec

import (
	"math"
	"strconv"
	"testing"
)

// A timestamp outside the years RFC 3339 can write decodes to its integer,
// which encodes back to the same value.
func TestTimestampsOutsideRFC3339RoundTrip(t *testing.T) {
	c := mustCompile(t, orderSchema, Options{})
	for _, ms := range []int64{math.MaxInt64, math.MinInt64, 253402300800000, -62135596800001, 1e15, 1705313045123} {
		in := `{"id":1,"items":[],"placed_at":` + strconv.FormatInt(ms, 10) + `,"amount":"1.00","status":"NEW","tags":{}}`
		bin, err := c.AppendBinary(nil, []byte(in))
		if err != nil {
			t.Fatalf("%d: encode: %v", ms, err)
		}
		out, err := c.AppendJSON(nil, bin, 1<<16)
		if err != nil {
			t.Fatalf("%d: decode: %v", ms, err)
		}
		again, err := c.AppendBinary(nil, out)
		if err != nil || string(again) != string(bin) {
			t.Fatalf("%d: %s does not encode back to the same bytes: %v", ms, out, err)
		}
	}
}
