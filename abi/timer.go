package abi

import "encoding/binary"

// TimerFiring is what the host hands wasmstream_on_timer (ABI.md §4.2,
// "The firing's encoding"): the due timer (Key, At), the stream time T of
// the round that made it due, and where it comes from.
type TimerFiring struct {
	At         int64 // the timer's at (milliseconds)
	StreamTime int64 // the round's T, at or after At
	Partition  int32 // the input partition
	Attempt    uint32
	Topic      string // the input topic
	Key        []byte // the timer's key (never null: the empty key is a key)
}

// timerFixed is the encoding's fixed part: at, stream_time, partition,
// attempt.
const timerFixed = 8 + 8 + 4 + 4

// TimerFiringSize is the length of f's encoding.
func TimerFiringSize(f *TimerFiring) int { return timerFixed + 4 + len(f.Topic) + 4 + len(f.Key) }

// AppendTimerFiring appends the encoding of f to b: at i64 | stream_time
// i64 | partition i32 | attempt u32 | topic string | key (u32 length +
// bytes), little endian like a record's.
func AppendTimerFiring(b []byte, f *TimerFiring) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(f.At))
	b = binary.LittleEndian.AppendUint64(b, uint64(f.StreamTime))
	b = binary.LittleEndian.AppendUint32(b, uint32(f.Partition))
	b = binary.LittleEndian.AppendUint32(b, f.Attempt)
	b = appendString(b, f.Topic)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(f.Key)))
	return append(b, f.Key...)
}

// DecodeTimerFiring decodes a firing's encoding; Key aliases b.
func DecodeTimerFiring(b []byte) (TimerFiring, error) {
	d := decoder{b: b}
	var f TimerFiring
	f.At = int64(d.u64())
	f.StreamTime = int64(d.u64())
	f.Partition = int32(d.u32())
	f.Attempt = d.u32()
	f.Topic = d.str()
	f.Key = d.key()
	return f, d.finish("timer firing")
}
