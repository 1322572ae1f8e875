package wasmtest

import "github.com/wasmstream/wasmstream/abi"

// Repeat is the instructions of a counted loop: body runs n times (at least
// once), counting in the i32 local counter, which must start at 0 (a
// declared local, see Func.Locals). body must leave the stack as it found
// it.
func Repeat(n int32, counter uint32, body []byte) []byte {
	b := []byte{0x03, 0x40} // loop (no result)
	b = append(b, body...)
	b = append(b, LocalGet(counter)...)
	b = append(b, I32Const(1)...)
	b = append(b, 0x6a)                                   // i32.add
	b = append(append(b, 0x22), uleb(uint64(counter))...) // local.tee counter
	b = append(b, I32Const(n)...)                         // n
	b = append(b, 0x49)                                   // i32.lt_u
	b = append(b, 0x0d, 0x00)                             // br_if 0: again while counter < n
	return append(b, 0x0b)                                // end
}

// LogLoop returns a module whose on_record calls the log import n times
// with the msgLen bytes at address 0 of its memory, then returns status OK.
func LogLoop(n int32, level int32, msgLen int32) Module {
	m := Minimal(nil, Import{Module: abi.HostModule, Name: abi.ImportLog, Params: []byte{I32, I32, I32}})
	body := append(I32Const(level), I32Const(0)...)
	body = append(body, I32Const(msgLen)...)
	body = append(body, Call(0)...)
	m.Funcs[1].Locals = []Locals{{N: 1, Type: I32}} // local 2, after the two params
	m.Funcs[1].Body = append(Repeat(n, 2, body), I32Const(0)...)
	return m
}
