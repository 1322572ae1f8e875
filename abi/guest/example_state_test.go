//go:build !wasip1

package guest_test

import (
	"fmt"
	"strconv"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/guest"
)

// A running count per key in the state (the pipeline has state.enabled);
// a record keyed "list" scans the counts instead. On the host (go test),
// Run keeps the state in memory and applies a record's writes only when it
// succeeds, as the wasmstream host does.
func Example_state() {
	guest.ResetState()
	guest.Process(func(r *guest.Record, out guest.Emitter) error {
		if string(r.Key) == "list" {
			return guest.StateScan(nil, func(k, v []byte) bool {
				fmt.Printf("%s:%s ", k, v)
				return true
			})
		}
		v, _, err := guest.StateGet(r.Key)
		if err != nil {
			return guest.Terminal(err) // e.g. abi.ErrnoWrongKey: to the dead-letter topic
		}
		n, _ := strconv.Atoi(string(v))
		next := []byte(strconv.Itoa(n + 1))
		if err := guest.StatePut(r.Key, next); err != nil {
			return guest.Terminal(err)
		}
		return out.Emit(guest.Output{Key: r.Key, Value: next})
	})
	for _, k := range []string{"a", "b", "a"} {
		res := guest.Run(abi.Record{Topic: "in", Key: []byte(k)})
		fmt.Printf("%s=%s\n", res.Outputs[0].Key, res.Outputs[0].Value)
	}
	guest.Run(abi.Record{Topic: "in", Key: []byte("list")})
	fmt.Println()
	// Output:
	// a=1
	// b=1
	// a=2
	// a:2 b:1
}
