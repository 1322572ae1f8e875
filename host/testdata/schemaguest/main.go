// Command schemaguest is a test processor of the schema-registry
// operations (ABI.md §7.3): for a record keyed by a subject it looks up the
// subject's latest schema, then that schema by id, and emits what it read
// ("id=4 version=1 type=AVRO refs=0 <text>"); a record keyed "timer" only
// waits on a zero timer and emits "timer". A lookup the host refuses fails
// the record terminally, any other failure retryably.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o schemaguest.wasm .
package main

import (
	"fmt"

	"github.com/wasmstream/wasmstream/abi/guest"
)

func main() {}

func init() { guest.Process(lookup) }

func lookup(r *guest.Record, out guest.Emitter) error {
	if string(r.Key) == "timer" {
		return guest.Await(guest.Timer(0), func(_ struct{}, err error) error {
			if err != nil {
				return err
			}
			return out.Emit(guest.Output{Key: r.Key, Value: []byte("timer")})
		})
	}
	fail := func(err error) error {
		if guest.IsRefused(err) {
			return guest.Terminal(err)
		}
		return err
	}
	return guest.Await(guest.SchemaBySubject(string(r.Key), guest.SchemaLatest), func(ss *guest.SubjectSchema, err error) error {
		if err != nil {
			return fail(err)
		}
		return guest.Await(guest.SchemaByID(ss.ID), func(s *guest.Schema, err error) error {
			if err != nil {
				return fail(err)
			}
			v := fmt.Sprintf("id=%d version=%d type=%s refs=%d %s", ss.ID, ss.Version, s.Type, len(s.References), s.Schema)
			return out.Emit(guest.Output{Key: r.Key, Value: []byte(v)})
		})
	})
}
