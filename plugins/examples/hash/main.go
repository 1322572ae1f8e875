// Command hash is a CPU-bound wasmstream processor: it hashes each record's
// value with SHA-256, `rounds` times over (the record header "rounds", a
// decimal number, default 100), and emits a JSON object with the digest and
// the record's coordinates. Varying "rounds" per record varies its latency,
// which the pool and ordering tests use.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o hash.wasm .
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/wasmstream/wasmstream/abi/guest"
)

func main() {}

func init() { guest.Process(hash) }

func hash(r *guest.Record, out guest.Emitter) error {
	rounds := 100
	if h, ok := r.Header("rounds"); ok {
		n, err := strconv.Atoi(string(h))
		if err != nil || n < 0 || n > 10_000_000 {
			return guest.Terminal(fmt.Errorf("bad rounds header %q", h))
		}
		rounds = n
	}
	sum := sha256.Sum256(r.Value)
	for i := 1; i < rounds; i++ {
		sum = sha256.Sum256(sum[:])
	}
	v := fmt.Sprintf(`{"partition":%d,"offset":%d,"rounds":%d,"sha256":%q}`, r.Partition, r.Offset, rounds, hex.EncodeToString(sum[:]))
	return out.Emit(guest.Output{Key: r.Key, Value: []byte(v)})
}
