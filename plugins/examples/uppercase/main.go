// Command uppercase is a wasmstream processor: it emits each record with its
// value in upper case, keeping key and headers. Built with a version
// (-ldflags "-X main.version=2"), it also sets the header processor.version,
// which shows which version processed a record (hot-swap tests).
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o uppercase.wasm .
package main

import (
	"bytes"
	"encoding/binary"

	"github.com/wasmstream/wasmstream/abi/guest"
)

func main() {}

func init() { guest.Process(uppercase) }

var version string

func uppercase(r *guest.Record, out guest.Emitter) error {
	v := r.Value
	if v != nil { // keep a null value null
		v = toUpper(v)
	}
	hs := r.Headers
	if version != "" {
		hs = append(hs[:len(hs):len(hs)], guest.Header{Key: "processor.version", Value: []byte(version)})
	}
	return out.Emit(guest.Output{Key: r.Key, Value: v, Headers: hs})
}

// toUpper upper-cases v as bytes.ToUpper does. ASCII text is changed in
// place (the record's slices are the processor's own during the call, and
// a Go guest pays more for allocating a new value than for the loop),
// eight bytes at a time while it can: a byte is a lower-case letter when
// adding 0x1f carries it past 0x7f ('a' and above) and adding 0x05 does
// not ('z' and below), and each such byte loses 0x20. From the first byte
// over 0x7f the rest is left to bytes.ToUpper.
func toUpper(v []byte) []byte {
	const high = 0x8080808080808080
	i := 0
	for ; i+8 <= len(v); i += 8 {
		w := binary.LittleEndian.Uint64(v[i:])
		if w&high != 0 {
			break
		}
		lower := (w + 0x1f1f1f1f1f1f1f1f) &^ (w + 0x0505050505050505) & high
		binary.LittleEndian.PutUint64(v[i:], w-lower>>2)
	}
	for ; i < len(v); i++ {
		switch c := v[i]; {
		case c >= 0x80:
			return bytes.ToUpper(v) // Unicode: the prefix done so far is upper already
		case 'a' <= c && c <= 'z':
			v[i] = c - ('a' - 'A')
		}
	}
	return v
}
