;; A module that imports timer_set but does not export wasmstream_on_timer:
;; its timers could never fire, so the host refuses it at load.
(module
  (import "wasmstream_v1" "timer_set" (func $set (param i32 i32 i32 i64) (result i32)))
  (memory (export "memory") 1)
  (func (export "wasmstream_abi_version") (result i32) (i32.const 1))
  (func (export "wasmstream_on_record") (param i32 i32) (result i32) (i32.const 0))
)
