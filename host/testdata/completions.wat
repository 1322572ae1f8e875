;; A guest of the completions entry (ABI.md §10.1) for
;; host/completions_test.go. Each record starts a timer of 0 ns and waits
;; on it; what its completion does comes from its offset (the kind) and
;; timestamp (the argument):
;;   0 ok, no outputs             1 ok, one output (value "A") in the list
;;   2 trap (unreachable)          3 spin arg ms by the monotonic clock, ok
;;   4 loop forever                5 first completion: pending on a further
;;   6 fail                          timer of arg ms; second: ok, one output
;;   8 end with status 9           9 return from the call during the completion (ok)
;; wasmstream_on_complete does the same, one completion per call (its one
;; output through emit). The exports test_calls_many and test_calls_one
;; count the calls of each entry.
;; Memory: 0 clock scratch, 16 timer request, 1024 the output list,
;; 2048 a flag per handle (kind 5), 8192 the completion buffer,
;; 65536 the record buffer.
(module
  (import "wasmstream_batch_v1" "completion_next" (func $next (param i32 i32 i32 i32 i32) (result i32)))
  (import "wasmstream_v1" "async_start" (func $async (param i32 i32 i32 i32) (result i32)))
  (import "wasmstream_v1" "record_read" (func $read (param i32 i32 i32) (result i32)))
  (import "wasmstream_v1" "emit" (func $emit (param i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))
  (memory (export "memory") 4)
  (global $many (mut i32) (i32.const 0))
  (global $one (mut i32) (i32.const 0))
  (global $outlen (mut i32) (i32.const 0))
  (func (export "test_calls_many") (result i32) (global.get $many))
  (func (export "test_calls_one") (result i32) (global.get $one))
  (func (export "wasmstream_abi_version") (result i32) (i32.const 1))
  (func $now (result i64)
    (drop (call $clock (i32.const 1) (i64.const 0) (i32.const 0)))
    (i64.load (i32.const 0)))
  (func $timer (param $h i32) (param $ms i64)
    (i64.store (i32.const 16) (i64.mul (local.get $ms) (i64.const 1000000)))
    (drop (call $async (local.get $h) (i32.const 1) (i32.const 16) (i32.const 8))))
  (func (export "wasmstream_on_record") (param $h i32) (param $len i32) (result i32)
    (i32.store (i32.add (i32.const 2048) (i32.shl (i32.and (local.get $h) (i32.const 255)) (i32.const 2))) (i32.const 0))
    (call $timer (local.get $h) (i64.const 0))
    (i32.const 1))
  ;; $output puts one output (value "A") in the list.
  (func $output
    ;; u32 length 21 | topic "" | partition -1 | key null | value of 1 byte | no headers
    (i32.store (i32.const 1024) (i32.const 21))
    (i32.store (i32.const 1028) (i32.const 0))
    (i32.store (i32.const 1032) (i32.const -1))
    (i32.store (i32.const 1036) (i32.const -1))
    (i32.store (i32.const 1040) (i32.const 1))
    (i32.store8 (i32.const 1044) (i32.const 65))
    (i32.store (i32.const 1045) (i32.const 0))
    (global.set $outlen (i32.const 25)))
  ;; $act runs the completion of record $h and returns its status; the
  ;; output list is at 1024, $outlen long. -1: return from the call now.
  (func $act (param $h i32) (result i32)
    (local $kind i64) (local $arg i64) (local $until i64) (local $flag i32)
    (global.set $outlen (i32.const 0))
    (if (i32.lt_s (call $read (local.get $h) (i32.const 65536) (i32.const 131072)) (i32.const 0))
      (then (return (i32.const 0)))) ;; canceled: the handle is no longer valid
    (local.set $kind (i64.load (i32.const 65536)))
    (local.set $arg (i64.load (i32.const 65544)))
    (if (i64.eq (local.get $kind) (i64.const 1)) (then (call $output)))
    (if (i64.eq (local.get $kind) (i64.const 2)) (then (unreachable)))
    (if (i64.eq (local.get $kind) (i64.const 3)) (then
      (local.set $until (i64.add (call $now) (i64.mul (local.get $arg) (i64.const 1000000))))
      (block $done (loop $spin
        (br_if $done (i64.ge_u (call $now) (local.get $until)))
        (br $spin)))))
    (if (i64.eq (local.get $kind) (i64.const 4)) (then (loop $forever (br $forever))))
    (if (i64.eq (local.get $kind) (i64.const 5)) (then
      (local.set $flag (i32.add (i32.const 2048) (i32.shl (i32.and (local.get $h) (i32.const 255)) (i32.const 2))))
      (if (i32.eqz (i32.load (local.get $flag))) (then
        (i32.store (local.get $flag) (i32.const 1))
        (call $timer (local.get $h) (local.get $arg))
        (return (i32.const 1))))
      (call $output)))
    (if (i64.eq (local.get $kind) (i64.const 6)) (then (return (i32.const 3))))
    (if (i64.eq (local.get $kind) (i64.const 8)) (then (return (i32.const 9))))
    (if (i64.eq (local.get $kind) (i64.const 9)) (then (return (i32.const -1))))
    (i32.const 0))
  (func (export "wasmstream_on_complete") (param $h i32) (param $op i32) (param $len i32) (result i32)
    (local $status i32)
    (global.set $one (i32.add (global.get $one) (i32.const 1)))
    (local.set $status (call $act (local.get $h)))
    (if (i32.eq (local.get $status) (i32.const -1)) (then (return (i32.const 0))))
    (if (i32.and (i32.le_u (local.get $status) (i32.const 1)) (i32.ne (global.get $outlen) (i32.const 0)))
      (then (drop (call $emit (local.get $h) (i32.const 1028) (i32.const 21)))))
    (local.get $status))
  (func (export "wasmstream_on_completions_v1") (param $count i32) (param $max i32) (result i32)
    (local $status i32) (local $n i32)
    (global.set $many (i32.add (global.get $many) (i32.const 1)))
    (global.set $outlen (i32.const 0))
    (loop $completions
      (local.set $n (call $next (local.get $status) (i32.const 1024) (global.get $outlen) (i32.const 8192) (i32.const 32768)))
      (if (i32.eqz (local.get $n)) (then (return (i32.const 0))))
      ;; the header: handle, op, result length; the result follows it
      (if (i32.ne (local.get $n) (i32.add (i32.const 12) (i32.load (i32.const 8200)))) (then (unreachable)))
      (local.set $status (call $act (i32.load (i32.const 8192))))
      (if (i32.eq (local.get $status) (i32.const -1)) (then (return (i32.const 0))))
      (br $completions))
    (i32.const 0)))
