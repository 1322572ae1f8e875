;; A guest of the timer host functions (ABI.md §4.2) for host/timers_test.go.
;; wasmstream_on_record: the record's offset says what to do; it returns 0
;; (ok) when the calls answered as expected, 3 (fail) otherwise:
;;   0 timer_set("k", the record's timestamp): 0
;;   1 timer_set with a key of 1025 bytes: -9
;;   2 timer_set("k", 5) twice and timer_delete("k", 6): 0 each
;; wasmstream_on_timer: emits one output whose value is the firing's
;; encoding, after checking that timer_set at the firing's at returns -5
;; and at at + 1 returns 0; a firing at 99 returns pending (a protocol
;; fault), at 98 fail with an error.
;; Memory: 100 "k", 1000 a 1025-byte key (zeros), 4096 the output
;; (its 16-byte head, then the firing), 65536 the record.
(module
  (import "wasmstream_v1" "record_read" (func $read (param i32 i32 i32) (result i32)))
  (import "wasmstream_v1" "emit" (func $emit (param i32 i32 i32) (result i32)))
  (import "wasmstream_v1" "set_error" (func $seterr (param i32 i32 i32) (result i32)))
  (import "wasmstream_v1" "timer_set" (func $set (param i32 i32 i32 i64) (result i32)))
  (import "wasmstream_v1" "timer_delete" (func $del (param i32 i32 i32 i64) (result i32)))
  (memory (export "memory") 2)
  (data (i32.const 100) "k")
  (data (i32.const 200) "failed")
  ;; The output's head: topic "" (0), partition -1, key null (-1).
  (data (i32.const 4096) "\00\00\00\00\ff\ff\ff\ff\ff\ff\ff\ff")
  (func (export "wasmstream_abi_version") (result i32) (i32.const 1))
  (func (export "wasmstream_on_record") (param $h i32) (param $n i32) (result i32)
    (local $case i64)
    (drop (call $read (local.get $h) (i32.const 65536) (local.get $n)))
    (local.set $case (i64.load (i32.const 65536)))
    (if (i64.eq (local.get $case) (i64.const 0)) (then
      (return (select (i32.const 0) (i32.const 3)
        (i32.eqz (call $set (local.get $h) (i32.const 100) (i32.const 1) (i64.load (i32.const 65544))))))))
    (if (i64.eq (local.get $case) (i64.const 1)) (then
      (return (select (i32.const 0) (i32.const 3)
        (i32.eq (call $set (local.get $h) (i32.const 1000) (i32.const 1025) (i64.const 1)) (i32.const -9))))))
    (if (i64.eq (local.get $case) (i64.const 2)) (then
      (if (i32.ne (call $set (local.get $h) (i32.const 100) (i32.const 1) (i64.const 5)) (i32.const 0)) (then (return (i32.const 3))))
      (if (i32.ne (call $set (local.get $h) (i32.const 100) (i32.const 1) (i64.const 5)) (i32.const 0)) (then (return (i32.const 3))))
      (return (select (i32.const 0) (i32.const 3)
        (i32.eqz (call $del (local.get $h) (i32.const 100) (i32.const 1) (i64.const 6)))))))
    (i32.const 3))
  (func (export "wasmstream_on_timer") (param $h i32) (param $n i32) (result i32)
    (local $at i64)
    (drop (call $read (local.get $h) (i32.const 4112) (local.get $n)))
    (i32.store (i32.const 4108) (local.get $n))
    (i32.store (i32.add (i32.const 4112) (local.get $n)) (i32.const 0))
    (local.set $at (i64.load (i32.const 4112)))
    (if (i64.eq (local.get $at) (i64.const 99)) (then (return (i32.const 1))))
    (if (i64.eq (local.get $at) (i64.const 98)) (then
      (drop (call $seterr (local.get $h) (i32.const 200) (i32.const 6)))
      (return (i32.const 3))))
    (if (i32.ne (call $set (local.get $h) (i32.const 100) (i32.const 1) (local.get $at)) (i32.const -5)) (then (return (i32.const 3))))
    (if (i32.ne (call $set (local.get $h) (i32.const 100) (i32.const 1) (i64.add (local.get $at) (i64.const 1))) (i32.const 0)) (then (return (i32.const 3))))
    (if (i32.ne (call $emit (local.get $h) (i32.const 4096) (i32.add (local.get $n) (i32.const 20))) (i32.const 0)) (then (return (i32.const 3))))
    (i32.const 0))
)
