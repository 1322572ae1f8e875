;; A transform importing Redpanda's schema-registry module, which this host
;; does not serve: refused at load, naming it.
(module
  (import "redpanda_transform" "check_abi_version_2" (func $check))
  (import "redpanda_schema_registry" "check_abi_version_0" (func $sr))
  (memory (export "memory") 1)
  (func (export "_start") call $check call $sr)
)
