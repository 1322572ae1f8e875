;; A transform whose _start returns instead of looping on read_batch_header.
(module
  (import "redpanda_transform" "check_abi_version_2" (func $check))
  (memory (export "memory") 1)
  (func (export "_start") call $check)
)
