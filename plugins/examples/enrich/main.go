// Command enrich is a wasmstream processor that parses each record's value as
// a JSON object, adds fields describing the record, and emits the enriched
// object. A field "fault" in the input makes it misbehave on purpose, for
// testing how the host contains guest faults:
//
//	"fail"    terminal failure (an error marked guest.Terminal)
//	"retry"   retryable failure (a plain error)
//	"transient" retryable failure until the attempt number reaches the
//	          field "until" (default 3), then success
//	"panic"   a Go panic (the Go runtime exits: an instance fault)
//	"loop"    an infinite loop (the host's record deadline interrupts it)
//	"oom"     allocates without bound (memory grows to the limit, then the
//	          Go runtime dies with "out of memory")
//	"badptr"  passes a pointer outside its memory to a host function
//	"exit"    calls os.Exit(3)
//
// A field "emit": N emits the enriched object N times (0: none), returning
// the error of the first output the host refuses (a limit).
//
// Values that are not JSON objects fail terminally ("poison records").
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o enrich.wasm .
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/wasmstream/wasmstream/abi/guest"
)

func main() {}

func init() { guest.Process(enrich) }

var sink [][]byte

func enrich(r *guest.Record, out guest.Emitter) error {
	var doc map[string]any
	if err := json.Unmarshal(r.Value, &doc); err != nil {
		return guest.Terminal(fmt.Errorf("value is not a JSON object: %w", err))
	}
	switch fault, _ := doc["fault"].(string); fault {
	case "":
	case "fail":
		return guest.Terminal(errors.New("asked to fail"))
	case "retry":
		return errors.New("asked to retry")
	case "transient":
		until := 3.0
		if u, ok := doc["until"].(float64); ok {
			until = u
		}
		if float64(r.Attempt) < until {
			return fmt.Errorf("transient failure on attempt %d (succeeds at %v)", r.Attempt, until)
		}
	case "panic":
		panic("asked to panic")
	case "loop":
		for {
			spin++
		}
	case "oom":
		for {
			sink = append(sink, make([]byte, 1<<20))
		}
	case "badptr":
		badPointer()
	case "exit":
		os.Exit(3)
	default:
		return guest.Terminal(fmt.Errorf("unknown fault %q", fault))
	}
	doc["source"] = map[string]any{"topic": r.Topic, "partition": r.Partition, "offset": r.Offset}
	doc["attempt"] = r.Attempt
	doc["enriched"] = true
	v, err := json.Marshal(doc)
	if err != nil {
		return guest.Terminal(err)
	}
	n := 1
	if e, ok := doc["emit"].(float64); ok {
		n = int(e)
	}
	for i := 0; i < n; i++ {
		if err := out.Emit(guest.Output{Key: r.Key, Value: v, Headers: r.Headers}); err != nil {
			return err
		}
	}
	return nil
}

var spin uint64
