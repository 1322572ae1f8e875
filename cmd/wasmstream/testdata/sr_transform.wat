;; A Redpanda transform that imports the schema-registry module (as the Go
;; SDK's transform/sr does) and loops on read_batch_header, dropping every
;; record: what `wasmstream validate` accepts only as a pipeline that grants
;; async.schema_registry runs it (TestValidateRedpandaSchemaRegistry).
(module
  (import "redpanda_transform" "check_abi_version_2" (func $check))
  (import "redpanda_transform" "read_batch_header" (func $header (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "redpanda_schema_registry" "check_abi_version_0" (func $sr))
  (memory (export "memory") 1)
  (func (export "_start")
    call $check
    call $sr
    (loop $batches
      (drop (call $header (i32.const 0) (i32.const 8) (i32.const 12) (i32.const 16) (i32.const 20)
                          (i32.const 24) (i32.const 32) (i32.const 40) (i32.const 48) (i32.const 52)))
      (br $batches)))
)
