;; A guest of the event-time host functions (ABI.md §4.2) for
;; host/state2_test.go's edge cases. The record's offset says what to do;
;; the record returns 0 (ok) when the calls answered as expected, 3 (fail)
;; otherwise:
;;   0 stream_time with out across the end of memory (the call faults)
;;   1 state_get2 with a sub of 1025 bytes: -9
;;   2 state_put2 (k, "")="e" and (k, "a")="x", then state_scan2 of k into
;;     18 bytes (the empty sub's entry, 9 bytes, alone: -2) and into 19
;;     (both entries: 19)
;;   3 stream_time into 0: 0, and the i64 written there is 1234
;; Memory: 0 stream time, 100 "k", 200 "a", 201 "e", 202 "x", 1000 a
;; 1025-byte sub (zeros), 4096 the scan buffer, 65536 the record.
(module
  (import "wasmstream_v1" "record_read" (func $read (param i32 i32 i32) (result i32)))
  (import "wasmstream_v1" "state_get2" (func $get2 (param i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "wasmstream_v1" "state_put2" (func $put2 (param i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "wasmstream_v1" "state_scan2" (func $scan2 (param i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "wasmstream_v1" "stream_time" (func $time (param i32 i32) (result i32)))
  (memory (export "memory") 2)
  (data (i32.const 100) "k")
  (data (i32.const 200) "aex")
  (func (export "wasmstream_abi_version") (result i32) (i32.const 1))
  (func (export "wasmstream_on_record") (param $h i32) (param $n i32) (result i32)
    (local $case i64)
    (drop (call $read (local.get $h) (i32.const 65536) (local.get $n)))
    (local.set $case (i64.load (i32.const 65536)))
    (if (i64.eq (local.get $case) (i64.const 0)) (then
      (drop (call $time (local.get $h) (i32.const 131068)))
      (return (i32.const 0))))
    (if (i64.eq (local.get $case) (i64.const 1)) (then
      (return (select (i32.const 0) (i32.const 3)
        (i32.eq (call $get2 (local.get $h) (i32.const 100) (i32.const 1) (i32.const 1000) (i32.const 1025) (i32.const 4096) (i32.const 64))
                (i32.const -9))))))
    (if (i64.eq (local.get $case) (i64.const 2)) (then
      (if (i32.ne (call $put2 (local.get $h) (i32.const 100) (i32.const 1) (i32.const 200) (i32.const 0) (i32.const 201) (i32.const 1)) (i32.const 0))
        (then (return (i32.const 3))))
      (if (i32.ne (call $put2 (local.get $h) (i32.const 100) (i32.const 1) (i32.const 200) (i32.const 1) (i32.const 202) (i32.const 1)) (i32.const 0))
        (then (return (i32.const 3))))
      (if (i32.ne (call $scan2 (local.get $h) (i32.const 100) (i32.const 1) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 4096) (i32.const 18)) (i32.const -2))
        (then (return (i32.const 3))))
      (return (select (i32.const 0) (i32.const 3)
        (i32.eq (call $scan2 (local.get $h) (i32.const 100) (i32.const 1) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 4096) (i32.const 19))
                (i32.const 19))))))
    (if (i64.eq (local.get $case) (i64.const 3)) (then
      (if (i32.ne (call $time (local.get $h) (i32.const 0)) (i32.const 0)) (then (return (i32.const 3))))
      (return (select (i32.const 0) (i32.const 3) (i64.eq (i64.load (i32.const 0)) (i64.const 1234))))))
    (i32.const 3))
)
