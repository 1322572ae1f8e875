// Package shop is the avro-serde example's record types, Order
// (../schemas/order.avsc) and OrderTotal (../schemas/order-total.avsc),
// generated with their codecs, which sr uses while the records' schemas
// are the generated ones (a schema that evolved is read and written by
// the resolving path). tests/sdkserde runs the example and its codecs
// with these types too.
package shop

//go:generate go run ../../../../cmd/wasmstream gen avro --lang go --package shop --strings view --timestamps int64 --out order_avro.go ../schemas/order.avsc
//go:generate go run ../../../../cmd/wasmstream gen avro --lang go --package shop --strings view --timestamps int64 --out order_total_avro.go ../schemas/order-total.avsc
