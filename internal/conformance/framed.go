package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// Schema-registry data in a vectors file (docs/SCHEMA-REGISTRY.md): a
// record's key or value, or an expected output's, given as JSON for a
// schema. `wasmstream test` encodes it to the Confluent wire format with
// the schema, as a producer's serializer would, and runs the host's decode
// path on it, so the guest reads the JSON the host would give it; an
// expected output's JSON is encoded with the schema the pipeline's outputs
// are written with and compared with the guest's output as the host wrote
// it. The fields, beside "key" and "value" (and in each expected output):
//
//	"value_schema": "schemas/order.avsc"   a schema file, relative to the vectors
//	                                       file: .avsc (Avro), .proto (Protobuf),
//	                                       .json (JSON Schema)
//	"value_subject": "orders-value"        or a subject of the registry
//	"value_message": "shop.Order"          the Protobuf message (default: the first)
//
// and key_schema, key_subject, key_message for the key. Without them, a
// key or value of a pipeline whose input_format (output_format) is
// confluent is framed with the subject the topic names (<topic>-value,
// <topic>-key; for outputs, the output subject).

// Frame is how a vector's key or value is framed for a schema registry.
type Frame struct {
	// JSON is the key or value as given, as compact JSON text (a string
	// with its quotes); nil when it is null or absent, or given as bytes
	// (Raw).
	JSON []byte
	// Raw: given as *_base64, the bytes as they are (not framed here).
	Raw bool
	// Schema is a schema file as the vector names it, Subject a
	// registry subject (at most one of the two); Message the Protobuf
	// message ("": the schema's first).
	Schema, Subject, Message string
}

// Named reports whether the vector names a schema or subject.
func (f *Frame) Named() bool { return f.Schema != "" || f.Subject != "" }

// SchemaExts are the schema file extensions a vector may name, and the
// schema type of each.
var SchemaExts = map[string]string{".avsc": "AVRO", ".proto": "PROTOBUF", ".json": "JSON"}

// frameFields are a key's or value's schema fields as a vector gives them.
type frameFields struct {
	KeySchema    string `json:"key_schema"`
	KeySubject   string `json:"key_subject"`
	KeyMessage   string `json:"key_message"`
	ValueSchema  string `json:"value_schema"`
	ValueSubject string `json:"value_subject"`
	ValueMessage string `json:"value_message"`
}

// frames reads the key's and value's frames; prefix names the object the
// fields are in ("" for the record, "expect.outputs[0]." for an output).
func (f *frameFields) frames(prefix string, key, value json.RawMessage, keyB64, valueB64 bool) (k, v Frame, err error) {
	if k, err = frameOf(prefix+"key", key, keyB64, f.KeySchema, f.KeySubject, f.KeyMessage); err != nil {
		return k, v, err
	}
	v, err = frameOf(prefix+"value", value, valueB64, f.ValueSchema, f.ValueSubject, f.ValueMessage)
	return k, v, err
}

func frameOf(field string, raw json.RawMessage, b64 bool, schema, subject, message string) (Frame, error) {
	fr := Frame{Raw: b64, Schema: schema, Subject: subject, Message: message}
	switch {
	case schema != "" && subject != "":
		return fr, fmt.Errorf("%s_schema and %s_subject: give one (a schema file, or a subject of the registry)", field, field)
	case b64 && fr.Named():
		return fr, fmt.Errorf("%s_base64 with a schema: %s_base64 is the bytes as they are; give %s as JSON to have it framed with the schema", field, field, field)
	case message != "" && schema != "" && !strings.HasSuffix(schema, ".proto"):
		return fr, fmt.Errorf("%s_message: %q: a message names a Protobuf message, and %s_schema %q is not a .proto file", field, message, field, schema)
	}
	if schema != "" {
		if _, ok := SchemaExts[strings.ToLower(filepath.Ext(schema))]; !ok {
			return fr, fmt.Errorf("%s_schema: %q: want a schema file ending in .avsc (Avro), .proto (Protobuf) or .json (JSON Schema)", field, schema)
		}
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return fr, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return fr, fmt.Errorf("%s: %w", field, err)
	}
	fr.JSON = buf.Bytes()
	return fr, nil
}

// Compare sets what the output's key (part "key") or value is compared
// with: b, as JSON (spacing and key order aside) when asJSON, else byte
// for byte. `wasmstream test` sets the JSON of a framed output here, read
// back from the bytes the host would write.
func (o *ExpectOutput) Compare(part string, b []byte, asJSON bool) {
	j := jsonBytes{b: b, json: asJSON}
	if part == "key" {
		o.Key = j
	} else {
		o.Value = j
	}
}
