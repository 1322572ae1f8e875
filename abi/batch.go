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
