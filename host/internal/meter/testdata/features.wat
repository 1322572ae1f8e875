;; Every kind of instruction the meter decodes, in functions whose results
;; the tests compare before and after instrumentation (meter_test.go).
;; Assembled by the tests with wat2wasm (wasmtest.BuildWat).
(module
  (type $pair (func (param i32) (result i32 i32)))
  (import "env" "ignored" (func $imported (param i32) (result i32)))
  (memory (export "memory") 1)
  (table $t 4 funcref)
  (table $ext 2 externref)
  (global $g (mut i32) (i32.const 7))
  (global $gf funcref (ref.func $sum))
  (elem (i32.const 0) $sum $fib)
  (elem $passive funcref (ref.func $fib) (ref.null func))
  (elem declare func $twice)
  (data (i32.const 16) "hello, meter")
  (data $pd "passive")
  (start $init)

  (func $init (global.set $g (i32.const 9)))

  ;; A counted loop without calls: sum 0..n-1.
  (func $sum (export "sum") (result i32)
    (local $i i32) (local $acc i32)
    (loop $l
      (local.set $acc (i32.add (local.get $acc) (local.get $i)))
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 100000))))
    (local.get $acc))

  ;; Recursion.
  (func $fib (export "fib") (result i32) (call $fibn (i32.const 20)))
  (func $fibn (param $n i32) (result i32)
    (if (result i32) (i32.lt_u (local.get $n) (i32.const 2))
      (then (local.get $n))
      (else (i32.add (call $fibn (i32.sub (local.get $n) (i32.const 1)))
                     (call $fibn (i32.sub (local.get $n) (i32.const 2)))))))

  ;; Multi-value blocks and loops with parameters, br_table, select.
  (func $twice (type $pair) (local.get 0) (i32.add (local.get 0) (local.get 0)))
  (func $multi (export "multi") (result i32)
    (local $k i32)
    (i32.const 3)
    (loop $l (param i32) (result i32)
      (local.set $k (i32.add (local.get $k) (i32.const 1)))
      (call $twice)
      (i32.add)
      (br_if $l (i32.lt_u (local.get $k) (i32.const 5))))
    (block $a (param i32) (result i32)
      (block $b (param i32) (result i32)
        (br_table $a $b $a (local.get $k))))
    (select (i32.const 1) (i32.const 2) (i32.const 0))
    (i32.add)
    (select (result i32) (i32.const 10) (i32.const 20) (i32.const 1))
    (i32.add))

  ;; Tables, references, call_indirect, ref.func.
  (func $refs (export "refs") (result i32)
    (local $r funcref)
    (local.set $r (ref.func $twice))
    (table.set $t (i32.const 2) (table.get $t (i32.const 1)))
    (table.grow $t (ref.null func) (i32.const 2))
    (drop)
    (table.fill $t (i32.const 4) (global.get $gf) (i32.const 2))
    (table.init $t $passive (i32.const 0) (i32.const 0) (i32.const 1))
    (table.copy $t $t (i32.const 3) (i32.const 0) (i32.const 1))
    (elem.drop $passive)
    (drop (table.size $ext))
    (i32.add (call_indirect $t (result i32) (i32.const 3))
      (i32.add (ref.is_null (local.get $r)) (table.size $t))))

  ;; Memory, bulk memory, sign extension, saturating conversions.
  (func $mem (export "mem") (result i64)
    (memory.fill (i32.const 100) (i32.const 0x41) (i32.const 1000))
    (memory.copy (i32.const 2000) (i32.const 16) (i32.const 12))
    (memory.init $pd (i32.const 3000) (i32.const 0) (i32.const 7))
    (data.drop $pd)
    (i32.store8 offset=1 (i32.const 4000) (i32.const 0xff))
    (drop (memory.grow (i32.const 1)))
    (i64.add
      (i64.add (i64.extend_i32_s (i32.extend8_s (i32.load8_u offset=1 (i32.const 4000))))
               (i64.load align=4 (i32.const 2000)))
      (i64.add (i64.extend_i32_u (memory.size))
               (i64.trunc_sat_f64_s (f64.const 1e300)))))

  ;; SIMD: loads, lanes, shuffle, an opcode encoded in two bytes (i32x4.dot).
  (func $simd (export "simd") (result i32)
    (local $v v128)
    (local.set $v (v128.const i32x4 1 2 3 4))
    (v128.store (i32.const 5000) (local.get $v))
    (local.set $v (i32x4.add (local.get $v) (v128.load (i32.const 5000))))
    (local.set $v (v128.load32_lane 1 (i32.const 5000) (local.get $v)))
    (v128.store64_lane 0 (i32.const 5100) (local.get $v))
    (local.set $v (i8x16.shuffle 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 (local.get $v) (local.get $v)))
    (local.set $v (i32x4.dot_i16x8_s (local.get $v) (v128.load32_zero (i32.const 5100))))
    (i32.add (i32x4.extract_lane 0 (i32x4.replace_lane 1 (local.get $v) (i32.const 5)))
             (i32.add (i32x4.extract_lane 1 (local.get $v)) (i8x16.all_true (local.get $v)))))

  ;; A nested loop whose inner loop runs many times per outer iteration.
  (func $nested (export "nested") (result i32)
    (local $i i32) (local $j i32) (local $acc i32)
    (loop $outer
      (local.set $j (i32.const 0))
      (loop $inner
        (local.set $acc (i32.xor (i32.mul (local.get $acc) (i32.const 31)) (local.get $j)))
        (br_if $inner (i32.lt_u (local.tee $j (i32.add (local.get $j) (i32.const 1))) (i32.const 1000))))
      (br_if $outer (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 100))))
    (i32.add (local.get $acc) (global.get $g)))

  (func (export "uses_import") (result i32) (call $imported (i32.const 1)))
)
