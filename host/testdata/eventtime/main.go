// Command eventtime is a test processor of two-part state keys and stream
// time (ABI.md §4.2), through the Go SDK's bindings (window.Bind): for each
// record it reads the partition's stream time, keeps the record's value
// under (record key, timestamp) and emits "<stream time> <subs>", where
// <subs> lists the key's subs and values in sub order ("sub=value,...").
// The header "eventtime.one" also writes the one-part key, which must stay
// apart: a record whose (key, "") reads it fails. A record whose value is
// "fail" fails (terminally) after reading the stream time. With the
// header "eventtime.count" the output is "<stream time> n=<subs>
// last=<last sub>" instead of the list.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o eventtime.wasm .
package main

import (
	"errors"
	"strconv"

	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/window"
)

func main() {}

func init() { guest.Process(process) }

func process(r *guest.Record, em guest.Emitter) error {
	h := window.Bind(guest.Handle())
	st, err := h.StreamTime()
	if err != nil {
		return err
	}
	if string(r.Value) == "fail" {
		return guest.Terminal(errors.New("asked to fail"))
	}
	if _, ok := r.Header("eventtime.one"); ok {
		if err := guest.StatePut(r.Key, []byte("one")); err != nil {
			return err
		}
	}
	if v, ok, err := h.Get(r.Key, nil); err != nil || ok {
		return errors.Join(err, errors.New("(key, \"\") reads "+string(v)+": the one-part key leaked"))
	}
	sub := strconv.AppendInt(nil, r.Timestamp.UnixMilli(), 10)
	if err := h.Put(r.Key, sub, r.Value); err != nil {
		return err
	}
	out := strconv.AppendInt(nil, st, 10)
	out = append(out, ' ')
	if _, ok := r.Header("eventtime.count"); ok {
		n, last := 0, ""
		if err := h.Scan(r.Key, nil, func(s, _ []byte) bool { n, last = n+1, string(s); return true }); err != nil {
			return err
		}
		out = append(strconv.AppendInt(append(out, "n="...), int64(n), 10), " last="+last...)
		return em.Emit(guest.Output{Key: r.Key, Value: out})
	}
	first := true
	if err := h.Scan(r.Key, nil, func(s, v []byte) bool {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(append(append(out, s...), '='), v...)
		return true
	}); err != nil {
		return err
	}
	return em.Emit(guest.Output{Key: r.Key, Value: out})
}
