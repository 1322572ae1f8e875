package host

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
)

// sameAsGo fails unless a guest in another language (lang) gave the same
// result as the Go example: the same status, an error when Go's has one,
// and the same outputs byte for byte, nil and empty kept apart. The AS and
// Rust comparisons share it; internal/conformance compares every SDK's
// examples over its own vectors.
func sameAsGo(t *testing.T, lang, what string, got, goRes Result) {
	t.Helper()
	if got.Status != goRes.Status || (got.Err == nil) != (goRes.Err == nil) {
		t.Fatalf("%s: %s guest %v (%v), Go guest %v (%v)", what, lang, got.Status, got.Err, goRes.Status, goRes.Err)
	}
	if len(got.Outputs) != len(goRes.Outputs) {
		t.Fatalf("%s: %s guest %d outputs, Go guest %d\n%s: %s\nGo: %s", what, lang, len(got.Outputs), len(goRes.Outputs), lang, outputsString(got.Outputs), outputsString(goRes.Outputs))
	}
	for i := range got.Outputs {
		g, w := abi.AppendOutput(nil, &got.Outputs[i]), abi.AppendOutput(nil, &goRes.Outputs[i])
		if !bytes.Equal(g, w) || !reflect.DeepEqual(got.Outputs[i], goRes.Outputs[i]) {
			t.Fatalf("%s: output %d differs\n%s: %s\nGo: %s", what, i, lang, outputsString(got.Outputs[i:i+1]), outputsString(goRes.Outputs[i:i+1]))
		}
	}
}

func outputsString(os []abi.Output) string {
	var b strings.Builder
	for _, o := range os {
		v := o.Value
		if len(v) > 200 {
			v = v[:200]
		}
		fmt.Fprintf(&b, "{topic %q partition %d key %q (nil %v) value %q (nil %v, %d bytes) headers %+v} ", o.Topic, o.Partition, o.Key, o.Key == nil, v, o.Value == nil, len(o.Value), o.Headers)
	}
	return b.String()
}
