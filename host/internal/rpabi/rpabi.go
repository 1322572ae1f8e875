// Package rpabi is the contract of Redpanda Data Transforms as their
// published SDKs (Apache-2.0: transform-sdk/go/transform, the Rust crate
// redpanda-transform-sdk 1.1.0) speak it: the names and signatures of the
// redpanda_transform imports, their return codes, and the record payload
// and write options they exchange. It holds no runtime: host/redpanda*.go
// serves the imports with it (docs/REDPANDA-TRANSFORMS.md).
//
// A record payload is the Kafka record-v2 body without its length,
// attributes and deltas, every length a zig-zag varint (encoding/binary's
// Varint):
//
//	key_len (-1: null) key  value_len (-1: null) value
//	header_count  { key_len key  value_len (-1: null) value } ...
//
// Write options are a list of (key byte, value); the only key is 0x01, the
// output topic, its value a zig-zag varint length and the name.
package rpabi

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/wasmstream/wasmstream/abi"
)

// Module is the import module of a Redpanda transform.
const Module = "redpanda_transform"

// SchemaRegistryModule and AIModule are the SDKs' other import modules:
// the first is served when the pipeline grants the schema registry
// (host/redpanda_sr.go), a module importing the second is refused naming
// it.
const (
	SchemaRegistryModule = "redpanda_schema_registry"
	AIModule             = "redpanda_ai"
)

// The imports of SchemaRegistryModule, as the Go SDK's sr package and the
// Rust crate redpanda-transform-sdk-sr 1.1.0 call them. Every one returns
// 0 (or, for the two that fill a buffer, the bytes written) on success and
// SRFailed otherwise; the SDKs report any other value as "not found".
//
//	check_abi_version_0()
//	get_schema_definition_len(id, len_out *i32) -> errno
//	get_schema_definition(id, buf, buf_len) -> written | errno
//	get_subject_schema_len(subject, subject_len, version, len_out *i32) -> errno
//	get_subject_schema(subject, subject_len, version, buf, buf_len) -> written | errno
//	create_subject_schema(subject, subject_len, def, def_len, id_out *i32) -> errno
//
// A schema definition and a subject schema are encoded as abi/schema.go
// describes (the same encoding); version -1 is the subject's latest.
const (
	SRCheckABIVersion0    = "check_abi_version_0"
	SRGetSchemaDefLen     = "get_schema_definition_len"
	SRGetSchemaDef        = "get_schema_definition"
	SRGetSubjectSchemaLen = "get_subject_schema_len"
	SRGetSubjectSchema    = "get_subject_schema"
	SRCreateSubjectSchema = "create_subject_schema"
)

// SRFailed is the schema-registry imports' failure: no such schema, a
// request the host refuses, or a buffer too small for the answer.
const SRFailed int32 = -1

// The imports of Module.
const (
	CheckABIVersion1       = "check_abi_version_1" // the C++ SDK's marker
	CheckABIVersion2       = "check_abi_version_2" // Go, Rust and JS SDK 1.x
	CheckABIVersion3       = "check_abi_version_3" // development ABI with read_batch_metadata
	ReadBatchHeader        = "read_batch_header"
	ReadNextRecord         = "read_next_record"
	WriteRecord            = "write_record"
	WriteRecordWithOptions = "write_record_with_options"
	ReadBatchMetadata      = "read_batch_metadata"
)

// Return codes of the imports (the SDKs compare a write's result with the
// payload's length and treat anything else as a failed write).
const (
	NoActive       int32 = -1 // read_next_record: no record left in the batch
	BufferTooSmall int32 = -2 // read_next_record: the payload does not fit (the answer asks for a bigger buffer)
	InvalidPayload int32 = -2 // write_record*: the payload or the options do not decode
	WriteFailed    int32 = -3 // write_record*: the write was refused (an output topic not configured, a limit)
	MetadataAbsent int32 = 0  // read_batch_metadata: the key has no value (Kafka consumers do not see a producer's principal)
)

// ExportStart is the entry of a Redpanda transform: a WASI command's
// _start, whose main loops on read_batch_header.
const ExportStart = "_start"

// Env names of the topics a transform is told about.
const (
	EnvInputTopic  = "REDPANDA_INPUT_TOPIC"
	EnvOutputTopic = "REDPANDA_OUTPUT_TOPIC_" // + index, 0 = the pipeline's output
	EnvPrefix      = "REDPANDA_"              // reserved: a pipeline's env may not set one
)

// StrictMemoryPages and StrictMaxOutputTopics are Redpanda's own limits
// (data_transforms_per_function_memory_limit's default of 2 MiB; 8 output
// topics), which the strict mode keeps.
const (
	StrictMemoryPages     = 32
	StrictMaxOutputTopics = 8
)

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("malformed redpanda payload")

// PayloadSize is the size of the payload AppendPayload writes for rec.
func PayloadSize(rec *abi.Record) int {
	n := sizedLen(rec.Key) + sizedLen(rec.Value) + varintLen(int64(len(rec.Headers)))
	for _, h := range rec.Headers {
		n += varintLen(int64(len(h.Key))) + len(h.Key) + sizedLen(h.Value)
	}
	return n
}

// AppendPayload appends the payload of rec (its key, value and headers) to
// dst.
func AppendPayload(dst []byte, rec *abi.Record) []byte {
	dst = appendSized(dst, rec.Key)
	dst = appendSized(dst, rec.Value)
	dst = binary.AppendVarint(dst, int64(len(rec.Headers)))
	for _, h := range rec.Headers {
		dst = binary.AppendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendSized(dst, h.Value)
	}
	return dst
}

// DecodePayload decodes a payload a guest wrote into an output to the
// pipeline's output topic (Topic "", Partition -1: the host's partitioner
// chooses). Its slices alias b; a null key or value is nil, an empty one
// is empty and not nil. At most abi.MaxHeaders headers; a header key may
// not be null (Kafka's may not).
func DecodePayload(b []byte) (abi.Output, error) {
	o := abi.Output{Partition: -1}
	var err error
	if o.Key, b, err = readSized(b, "key"); err != nil {
		return o, err
	}
	if o.Value, b, err = readSized(b, "value"); err != nil {
		return o, err
	}
	n, b, err := readVarint(b, "header count")
	if err != nil {
		return o, err
	}
	if n < 0 || n > abi.MaxHeaders || n > int64(len(b))/2 {
		return o, fmt.Errorf("%w: header count %d (at most %d, each at least 2 bytes)", ErrMalformed, n, abi.MaxHeaders)
	}
	if n > 0 {
		o.Headers = make([]abi.Header, n)
	}
	for i := range o.Headers {
		var k []byte
		if k, b, err = readSized(b, "header key"); err != nil {
			return o, err
		}
		if k == nil {
			return o, fmt.Errorf("%w: header %d has a null key", ErrMalformed, i)
		}
		o.Headers[i].Key = string(k)
		if o.Headers[i].Value, b, err = readSized(b, "header value"); err != nil {
			return o, err
		}
	}
	if len(b) != 0 {
		return o, fmt.Errorf("%w: %d bytes after the headers", ErrMalformed, len(b))
	}
	return o, nil
}

// OptionTopic is the write option that names the output topic.
const OptionTopic = 0x01

// DecodeOptions decodes write_record_with_options' options: the topic they
// name, "" when they name none (the default output).
func DecodeOptions(b []byte) (topic string, err error) {
	for len(b) > 0 {
		key := b[0]
		if key != OptionTopic {
			return "", fmt.Errorf("%w: unknown write option %#x", ErrMalformed, key)
		}
		var t []byte
		if t, b, err = readSized(b[1:], "topic"); err != nil {
			return "", err
		}
		if t == nil {
			return "", fmt.Errorf("%w: null topic", ErrMalformed)
		}
		topic = string(t)
	}
	return topic, nil
}

// AppendOptions appends the options that route a write to topic.
func AppendOptions(dst []byte, topic string) []byte {
	dst = append(dst, OptionTopic)
	dst = binary.AppendVarint(dst, int64(len(topic)))
	return append(dst, topic...)
}

func appendSized(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

func sizedLen(b []byte) int {
	if b == nil {
		return 1
	}
	return varintLen(int64(len(b))) + len(b)
}

func varintLen(v int64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutVarint(buf[:], v)
}

func readVarint(b []byte, what string) (int64, []byte, error) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, nil, fmt.Errorf("%w: %s: truncated or overlong varint", ErrMalformed, what)
	}
	return v, b[n:], nil
}

// readSized reads a length (-1: null) and that many bytes. what names
// them in an error (built only then: this runs for every field a guest
// writes).
func readSized(b []byte, what string) ([]byte, []byte, error) {
	n, k := binary.Varint(b)
	if k <= 0 {
		return nil, nil, fmt.Errorf("%w: %s length: truncated or overlong varint", ErrMalformed, what)
	}
	b = b[k:]
	switch {
	case n == -1:
		return nil, b, nil
	case n < -1 || n > int64(len(b)):
		return nil, nil, fmt.Errorf("%w: %s length %d with %d bytes left", ErrMalformed, what, n, len(b))
	}
	return b[:n:n], b[n:], nil
}
