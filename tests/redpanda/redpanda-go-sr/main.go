// A Redpanda Data Transform that reads the schema registry through
// Redpanda's published Go SDK (the sr package of
// github.com/redpanda-data/redpanda/src/transform-sdk/go/transform v1.1.0),
// unmodified by wasmstream: the host's conformance tests
// (host/redpanda_sr_test.go, tests/schemareg) run it. Built with the
// standard Go toolchain:
//
//	GOOS=wasip1 GOARCH=wasm go build -o redpanda_go_sr.wasm .
//
// Each record's value says what to do; the output's value is the answer,
// or "error: " and the SDK's error:
//
//	a framed value (0, a 4-byte schema id, the payload)
//	                               the schema's text, its type in header
//	                               "type", the key "id:<id>"
//	subject:<subject>:<version>    "id=<id> version=<v> <schema text>"
//	create:<subject>:<avro schema> "id=<id>": the schema registered
//	ids:<id>,<id>,...              the schemas' texts joined by "|", each
//	                               looked up in turn
package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/redpanda-data/redpanda/src/transform-sdk/go/transform"
	"github.com/redpanda-data/redpanda/src/transform-sdk/go/transform/sr"
)

var client sr.SchemaRegistryClient

func main() {
	client = sr.NewClient()
	transform.OnRecordWritten(onRecord)
}

func onRecord(e transform.WriteEvent, w transform.RecordWriter) error {
	r := e.Record()
	v := string(r.Value)
	out := transform.Record{Key: r.Key}
	switch {
	case strings.HasPrefix(v, "subject:"):
		parts := strings.SplitN(v, ":", 3)
		version, _ := strconv.Atoi(parts[2])
		s, err := client.LookupSchemaByVersion(parts[1], version)
		if err != nil {
			out.Value = []byte("error: " + err.Error())
			break
		}
		out.Value = []byte(fmt.Sprintf("id=%d version=%d %s", s.ID, s.Version, s.Schema.Schema))
	case strings.HasPrefix(v, "ids:"):
		var texts []string
		for _, f := range strings.Split(strings.TrimPrefix(v, "ids:"), ",") {
			id, _ := strconv.Atoi(f)
			s, err := client.LookupSchemaById(id)
			if err != nil {
				texts = append(texts, "error: "+err.Error())
				break
			}
			texts = append(texts, s.Schema)
		}
		out.Value = []byte(strings.Join(texts, "|"))
	case strings.HasPrefix(v, "create:"):
		parts := strings.SplitN(v, ":", 3)
		s, err := client.CreateSchema(parts[1], sr.Schema{Type: sr.TypeAvro, Schema: parts[2]})
		if err != nil {
			out.Value = []byte("error: " + err.Error())
			break
		}
		out.Value = []byte(fmt.Sprintf("id=%d", s.ID))
	default:
		id, err := sr.ExtractID(r.Value)
		if err != nil {
			out.Value = []byte("error: " + err.Error())
			break
		}
		s, err := client.LookupSchemaById(id)
		if err != nil {
			out.Value = []byte("error: " + err.Error())
			break
		}
		out.Key = []byte("id:" + strconv.Itoa(id))
		out.Value = []byte(s.Schema)
		out.Headers = []transform.RecordHeader{{Key: []byte("type"), Value: []byte(strconv.Itoa(int(s.Type)))}}
	}
	return w.Write(out)
}
