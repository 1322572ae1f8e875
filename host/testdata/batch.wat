;; A guest of the batch entry (ABI.md §10) for host/batch_test.go. Each
;; record says what to do with its offset (the kind) and timestamp (the
;; argument):
;;   0 ok, no outputs           1 ok, arg outputs in one output list
;;   2 trap (unreachable)        3 spin arg ms by the monotonic clock, ok
;;   4 loop forever              5 pending on a timer of arg ms
;;   6 retry                     7 hand record_next an output list outside memory
;;   8 end with status 9         9 return from the call during the record (ok)
;;  10 fail, handing record_next an output list outside memory (not read)
;; Memory: 0 clock scratch, 16 timer request, 1024 the output list,
;; 65536 the record buffer (128 KiB).
(module
  (import "wasmstream_batch_v1" "record_next" (func $next (param i32 i32 i32 i32 i32) (result i32)))
  (import "wasmstream_v1" "async_start" (func $async (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))
  (memory (export "memory") 4)
  (func (export "wasmstream_abi_version") (result i32) (i32.const 1))
  (func (export "wasmstream_on_record") (param i32 i32) (result i32) (i32.const 0))
  (func (export "wasmstream_on_complete") (param i32 i32 i32) (result i32) (i32.const 0))
  (func $now (result i64)
    (drop (call $clock (i32.const 1) (i64.const 0) (i32.const 0)))
    (i64.load (i32.const 0)))
  (func (export "wasmstream_on_batch_v1") (param $first i32) (param $count i32) (param $max i32) (result i32)
    (local $status i32) (local $outptr i32) (local $outlen i32) (local $n i32) (local $h i32)
    (local $kind i64) (local $arg i64) (local $i i32) (local $until i64)
    (local.set $h (i32.sub (local.get $first) (i32.const 1)))
    (local.set $outptr (i32.const 1024))
    (loop $records
      (local.set $n (call $next (local.get $status) (local.get $outptr) (local.get $outlen) (i32.const 65536) (i32.const 131072)))
      (if (i32.eqz (local.get $n)) (then (return (i32.const 0))))
      (local.set $h (i32.add (local.get $h) (i32.const 1)))
      (local.set $status (i32.const 0))
      (local.set $outptr (i32.const 1024))
      (local.set $outlen (i32.const 0))
      (local.set $kind (i64.load (i32.const 65536)))
      (local.set $arg (i64.load (i32.const 65544)))
      (if (i64.eq (local.get $kind) (i64.const 1)) (then
        (local.set $i (i32.const 0))
        (block $done (loop $outs
          (br_if $done (i64.ge_u (i64.extend_i32_u (local.get $i)) (local.get $arg)))
          ;; u32 length 21 | topic "" | partition -1 | key null | value of 1 byte | no headers
          (i32.store (i32.add (i32.const 1024) (local.get $outlen)) (i32.const 21))
          (i32.store (i32.add (i32.const 1028) (local.get $outlen)) (i32.const 0))
          (i32.store (i32.add (i32.const 1032) (local.get $outlen)) (i32.const -1))
          (i32.store (i32.add (i32.const 1036) (local.get $outlen)) (i32.const -1))
          (i32.store (i32.add (i32.const 1040) (local.get $outlen)) (i32.const 1))
          (i32.store8 (i32.add (i32.const 1044) (local.get $outlen)) (i32.add (i32.const 65) (i32.rem_u (local.get $i) (i32.const 26))))
          (i32.store (i32.add (i32.const 1045) (local.get $outlen)) (i32.const 0))
          (local.set $outlen (i32.add (local.get $outlen) (i32.const 25)))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $outs)))))
      (if (i64.eq (local.get $kind) (i64.const 2)) (then (unreachable)))
      (if (i64.eq (local.get $kind) (i64.const 3)) (then
        (local.set $until (i64.add (call $now) (i64.mul (local.get $arg) (i64.const 1000000))))
        (block $done (loop $spin
          (br_if $done (i64.ge_u (call $now) (local.get $until)))
          (br $spin)))))
      (if (i64.eq (local.get $kind) (i64.const 4)) (then (loop $forever (br $forever))))
      (if (i64.eq (local.get $kind) (i64.const 5)) (then
        (i64.store (i32.const 16) (i64.mul (local.get $arg) (i64.const 1000000)))
        (drop (call $async (local.get $h) (i32.const 1) (i32.const 16) (i32.const 8)))
        (local.set $status (i32.const 1))))
      (if (i64.eq (local.get $kind) (i64.const 6)) (then (local.set $status (i32.const 2))))
      (if (i64.eq (local.get $kind) (i64.const 7)) (then
        (local.set $outptr (i32.const -65536))
        (local.set $outlen (i32.const 16))))
      (if (i64.eq (local.get $kind) (i64.const 8)) (then (local.set $status (i32.const 9))))
      (if (i64.eq (local.get $kind) (i64.const 10)) (then
        (local.set $status (i32.const 3))
        (local.set $outptr (i32.const -65536))
        (local.set $outlen (i32.const 16))))
      (if (i64.eq (local.get $kind) (i64.const 9)) (then (return (i32.const 0))))
      (br $records))
    (i32.const 0)))
