//go:build !wasip1

package guest

import (
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
)

// The empty key is a key in the host-side state as in the host (ABI.md
// §4.1): a null and an empty record key read and write it; a scan of every
// key lists it first; an asynchronous scan's batch never ends with the
// empty key alone (its cursor, the empty key, would start the scan over),
// whatever the bound.
func TestStateEmptyKeyOnHost(t *testing.T) {
	ResetState()
	t.Cleanup(func() { processor = nil; ResetState() }) // for the examples, which register their own
	var listed []string
	processor = func(r *Record, out Emitter) error {
		switch string(r.Value) {
		case "scan":
			listed = nil
			return StateScan(nil, func(k, v []byte) bool { listed = append(listed, string(k)+"="+string(v)); return true })
		case "ascan":
			return Await(StateScanAsync(nil, nil, 1), func(b *StateBatch, err error) error {
				listed = nil
				for _, e := range b.Entries {
					listed = append(listed, string(e.Key)+"="+string(e.Value))
				}
				return err
			})
		}
		v, _, err := StateGet(r.Key)
		if err != nil {
			return err
		}
		return StatePut(r.Key, append(v, 'x'))
	}
	for _, k := range [][]byte{nil, {}, []byte("a")} {
		if res := Run(abi.Record{Topic: "in", Key: k}); res.Status != abi.StatusOK {
			t.Fatalf("key %#v: %v %v", k, res.Status, res.Err)
		}
	}
	if got := StateSnapshot(); string(got[""]) != "xx" || string(got["a"]) != "x" {
		t.Fatalf("state %q", got)
	}
	for _, mode := range []string{"scan", "ascan"} {
		if res := Run(abi.Record{Topic: "in", Value: []byte(mode)}); res.Status != abi.StatusOK {
			t.Fatalf("%s: %v", mode, res.Err)
		}
		if got := strings.Join(listed, ","); got != "=xx,a=x" {
			t.Fatalf("%s listed %q, want the empty key first and a with it", mode, got)
		}
	}
}
