package abi

import "encoding/binary"

// The batch entry (ABI.md, section 10): one call into the guest runs a run
// of records, each still metered, decided and isolated on its own. It is
// opt-in and versioned apart from ABI v1: a module that exports
// ExportOnBatch gets its records through it; any other module runs one call
// per record, unchanged.

// BatchVersion is the version of the batch entry. It is carried in the
// name of the import module (BatchModule) and of the export (ExportOnBatch),
// so a guest built for another version is refused at load.
const BatchVersion = 1

// BatchModule is the import module of the batch entry's host function.
const BatchModule = "wasmstream_batch_v1"

// ExportOnBatch: (first_handle i32, count i32, max_len i32) -> i32. Optional;
// a module that exports it must import ImportRecordNext.
const ExportOnBatch = "wasmstream_on_batch_v1"

// ImportRecordNext: (status i32, out i32, out_len i32, buf i32, buf_len
// i32) -> i32. Ends the batch's record in progress with status and the
// outputs at out[0:out_len] (OutputList), then begins the next record and
// copies its encoding to buf if it fits: returns its length, or 0 when the
// batch has no more records.
const ImportRecordNext = "record_next"

// AppendOutputList appends o to an output list: the outputs a batch record
// hands over in one record_next call, each a u32 length (little-endian)
// followed by the output's encoding (AppendOutput).
//
// It is AppendOutput's body written out (its calls inlined, the headers'
// only when there are some): a Go guest calls it for every output, and a
// call costs a Go guest more than the encoding of a small output.
func AppendOutputList(b []byte, o *Output) []byte {
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	b = appendString(b, o.Topic)
	b = binary.LittleEndian.AppendUint32(b, uint32(o.Partition))
	b = appendBytes(b, o.Key)
	b = appendBytes(b, o.Value)
	if len(o.Headers) == 0 {
		b = append(b, 0, 0, 0, 0)
	} else {
		b = appendHeaders(b, o.Headers)
	}
	n := uint32(len(b) - at - 4)
	b[at], b[at+1], b[at+2], b[at+3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
	return b
}

// The completions entry (ABI.md §10.1): one call into the guest delivers
// several completed asynchronous operations, each still metered, decided
// and isolated on its own record. Like the batch entry it is opt-in, and
// its host function lives in BatchModule; a module that does not export
// ExportOnCompletions gets one wasmstream_on_complete call per completion.

// ExportOnCompletions: (count i32, max_len i32) -> i32. Optional; a module
// that exports it must import ImportCompletionNext and export
// ExportOnComplete.
const ExportOnCompletions = "wasmstream_on_completions_v1"

// ImportCompletionNext: (status i32, out i32, out_len i32, buf i32, buf_len
// i32) -> i32. Ends the completion in progress with its record's status
// and the outputs at out[0:out_len] (OutputList), then begins the next
// completion: writes its CompletionHeaderSize-byte header (handle, op,
// result length, each a little-endian u32) to buf, followed by the result
// if it fits, and returns CompletionHeaderSize + the result's length; 0
// when the call has no more completions.
const ImportCompletionNext = "completion_next"

// CompletionHeaderSize is the length of the header completion_next writes
// before a completion's result; buf_len must be at least this.
const CompletionHeaderSize = 12
