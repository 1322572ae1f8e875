//go:build !wasip1

package guest

import (
	"fmt"

	"github.com/wasmstream/wasmstream/abi"
)

// Result is what Run observed: the outputs a record emitted (as the host
// would hold them) and its outcome.
type Result struct {
	Outputs []abi.Output
	Status  abi.Status
	Err     error
}

type collector struct{ out []abi.Output }

func (c *collector) Emit(o Output) error {
	ao := toABIOutput(&o)
	// Round-trip through the wire encoding, as the host would, so a test sees
	// exactly what the host would produce.
	got, err := abi.DecodeOutput(abi.AppendOutput(nil, &ao))
	if err != nil {
		return err
	}
	c.out = append(c.out, got)
	return nil
}

// Run processes r with the registered processor, on the host, without a
// WASM runtime. The record goes through the ABI encoding first, as it would
// in the host. Use it in a processor's unit tests.
func Run(r abi.Record) Result {
	if processor == nil {
		return Result{Status: abi.StatusFail, Err: fmt.Errorf("guest: no processor registered")}
	}
	if r.Attempt == 0 {
		r.Attempt = 1
	}
	ar, err := abi.DecodeRecord(abi.AppendRecord(nil, &r))
	if err != nil {
		return Result{Status: abi.StatusFail, Err: err}
	}
	var rec Record
	fromABIRecord(&ar, &rec)
	c := &collector{}
	err = processor(&rec, c)
	res := Result{Status: status(err), Err: err}
	if err == nil {
		res.Outputs = c.out
	}
	return res
}

// Log prints the message on the host (tests).
func Log(level int32, msg string) { fmt.Printf("guest log [%d]: %s\n", level, msg) }
