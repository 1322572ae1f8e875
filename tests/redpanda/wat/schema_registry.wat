;; A transform importing Redpanda's schema-registry module in a pipeline
;; that does not grant the registry: refused at load, naming the import and
;; async.schema_registry.enabled.
(module
  (import "redpanda_transform" "check_abi_version_2" (func $check))
  (import "redpanda_schema_registry" "check_abi_version_0" (func $sr))
  (memory (export "memory") 1)
  (func (export "_start") call $check call $sr)
)
