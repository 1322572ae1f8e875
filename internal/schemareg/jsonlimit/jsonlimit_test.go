package jsonlimit

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckDepth(t *testing.T) {
	for _, tc := range []struct {
		in  string
		max int
		ok  bool
	}{
		{`{"a":[1,{"b":2}]}`, 3, true},
		{`{"a":[1,{"b":2}]}`, 2, false},
		{`"[[[[[[" `, 1, true},   // brackets in a string do not count
		{`["\"[[[[["]`, 1, true}, // nor after an escaped quote
		{`[[]] [[]]`, 2, true},   // depth, not count
		{strings.Repeat("[", 100000), 64, false},
	} {
		err := CheckDepth([]byte(tc.in), tc.max)
		var de *DepthError
		if tc.ok != (err == nil) || (err != nil && !errors.As(err, &de)) {
			t.Errorf("CheckDepth(%.20q, %d) = %v", tc.in, tc.max, err)
		}
	}
}
