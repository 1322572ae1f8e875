// The SDK's abort function. AssemblyScript calls abort on a failed
// assertion, an out-of-bounds array index, a failed allocation ...; by
// default it imports env.abort, which the host refuses. The build uses
//   --use abort=<sdk>/assembly/abort/wasmstreamAbort
// instead: the message is written to stderr (the host attaches what a call
// wrote there to its fault, as it does a Go panic's message) and set as the
// record's error, then the guest traps (a `trap` fault: the record fails and
// the instance is replaced).

import * as host from "./host";

let abortHandle: u32 = 0;

/** The record whose call is running (0 outside calls). */
export function setAbortHandle(h: u32): void { abortHandle = h; }

export function wasmstreamAbort(message: string | null = null, fileName: string | null = null, line: u32 = 0, column: u32 = 0): void {
  let m = "abort: " + (message === null ? "" : changetype<string>(message));
  if (fileName !== null) m += " at " + changetype<string>(fileName) + ":" + line.toString() + ":" + column.toString();
  const b = String.UTF8.encode(m + "\n");
  const p = changetype<usize>(b), n = <u32>b.byteLength;
  const iov = memory.data(12); // ciovec {buf, len} and nwritten
  store<u32>(iov, <u32>p);
  store<u32>(iov, n, 4);
  host.fd_write(2, iov, 1, iov + 8);
  if (abortHandle != 0) host.set_error(abortHandle, p, n - 1);
  unreachable();
}
