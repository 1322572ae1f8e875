// The SDK's abort function. AssemblyScript calls abort on a failed
// assertion, an out-of-bounds array index, a failed allocation ...; by
// default it imports env.abort, which the host refuses. The build uses
//   --use abort=<sdk>/assembly/abort/wasmstreamAbort
// instead: the message becomes the record's error (and a host log line),
// then the guest traps (a `trap` fault: the instance is replaced).

import * as host from "./host";

let abortHandle: u32 = 0;

/** The record whose call is running (0 outside calls). */
export function setAbortHandle(h: u32): void { abortHandle = h; }

export function wasmstreamAbort(message: string | null = null, fileName: string | null = null, line: u32 = 0, column: u32 = 0): void {
  let m = "abort: " + (message === null ? "" : changetype<string>(message));
  if (fileName !== null) m += " at " + changetype<string>(fileName) + ":" + line.toString() + ":" + column.toString();
  const b = String.UTF8.encode(m);
  if (abortHandle != 0) host.set_error(abortHandle, changetype<usize>(b), <u32>b.byteLength);
  host.log(3, changetype<usize>(b), <u32>b.byteLength);
  unreachable();
}
