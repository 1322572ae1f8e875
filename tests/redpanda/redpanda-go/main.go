// A Redpanda Data Transform written with Redpanda's published Go SDK
// (github.com/redpanda-data/redpanda/src/transform-sdk/go/transform v1.1.0),
// unmodified by wasmstream: the host's conformance tests
// (host/redpanda_test.go) run it. Built with the standard Go toolchain:
//
//	GOOS=wasip1 GOARCH=wasm go build -o redpanda_go.wasm .
//
// Each record is written back unchanged (identity: key, value and headers,
// null and empty kept apart), unless its value is a directive:
//
//	route:<topic>  written unchanged to <topic> and to the default output
//	env            the value becomes the REDPANDA_ and TEST_ variables, sorted
//	time           the value becomes time.Now() in Unix milliseconds
//	random         the value becomes 8 bytes of crypto/rand
//	panic          the transform panics
//	twice          written twice
package main

import (
	"crypto/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redpanda-data/redpanda/src/transform-sdk/go/transform"
)

func main() {
	transform.OnRecordWritten(onRecord)
}

func onRecord(e transform.WriteEvent, w transform.RecordWriter) error {
	r := e.Record()
	v := string(r.Value)
	switch {
	case strings.HasPrefix(v, "route:"):
		if err := w.Write(r, transform.ToTopic(strings.TrimPrefix(v, "route:"))); err != nil {
			return err
		}
	case v == "env":
		var env []string
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, "REDPANDA_") || strings.HasPrefix(kv, "TEST_") {
				env = append(env, kv)
			}
		}
		sort.Strings(env)
		r.Value = []byte(strings.Join(env, "\n"))
	case v == "time":
		r.Value = []byte(strconv.FormatInt(time.Now().UnixMilli(), 10))
	case v == "random":
		r.Value = make([]byte, 8)
		if _, err := rand.Read(r.Value); err != nil {
			return err
		}
	case v == "panic":
		panic("asked to panic on offset " + strconv.FormatInt(r.Offset, 10))
	case v == "twice":
		if err := w.Write(r); err != nil {
			return err
		}
	}
	return w.Write(r)
}
