// Package order is the avro-serde example's Order and OrderTotal, generated
// from the example's schemas with the example's options, for the host-side
// tests and benchmarks of tests/sdkserde and its resolving guest: one
// definition (the schemas), which TestGeneratedFilesUpToDate
// (internal/avrogen) holds these files and the example's to.
package order

//go:generate go run ../../../cmd/wasmstream gen avro --lang go --package order --strings view --timestamps int64 --out order_avro.go ../../../plugins/examples/avro-serde/schemas/order.avsc
//go:generate go run ../../../cmd/wasmstream gen avro --lang go --package order --strings view --timestamps int64 --out order_total_avro.go ../../../plugins/examples/avro-serde/schemas/order-total.avsc
