// Command avro-serde is a wasmstream processor that reads records framed by
// a schema registry into a Go struct and writes a struct of its own back,
// framed, with the Go SDK's typed serde (package abi/guest/sr: a native
// Avro codec, no JSON between). The Rust example rust-avro-serde does the
// same, byte for byte.
//
// Input: an Order (schemas/order.avsc) framed with its schema id. Output:
// an OrderTotal (schemas/order-total.avsc), encoded with the latest schema
// of the subject $OUTPUT_SUBJECT (default order-totals-value): the order's
// id, customer, time and coupon, the number of items and the total, 10%
// off with a coupon. The pipeline grants the lookups:
//
//	input_format: {value: {format: raw}}        # the guest reads the frame itself
//	async: {schema_registry: {enabled: true}}
//	env: {OUTPUT_SUBJECT: order-totals-value}
//
// The first record of an instance looks its schemas up (the processor runs
// again once they are in hand); the others decode and encode in the guest.
// A value that is not framed, a schema that is not Avro, or an order the
// schema does not decode fails the record terminally.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o avro-serde.wasm .
package main

import (
	"os"

	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/sr"
	"github.com/wasmstream/wasmstream/plugins/examples/avro-serde/shop"
)

func main() {}

// outputSubject is the subject whose latest schema the output is written
// with.
var outputSubject = "order-totals-value"

// The records (package shop: generated with their codecs, which sr uses
// while the records' schemas are the generated ones) and the buffer are
// reused from record to record (Emit copies): a value passed to sr as an
// interface would otherwise be allocated for each record.
var (
	order shop.Order
	tot   shop.OrderTotal
	buf   []byte
)

func init() {
	if s := os.Getenv("OUTPUT_SUBJECT"); s != "" {
		outputSubject = s
	}
	sr.Process(total)
}

func total(r *guest.Record, out guest.Emitter) error {
	// Decode keeps nothing of the last record's order (its Items reuse
	// their array).
	if err := sr.Decode(r.Value, &order); err != nil {
		return err
	}
	// Field by field: a struct literal assigned to a variable is built
	// beside it and then copied, pointers and all.
	tot.ID, tot.Customer, tot.PlacedAt, tot.Coupon = order.ID, order.Customer, order.PlacedAt, order.Coupon
	tot.Items, tot.Total = int32(len(order.Items)), order.Amount
	if order.Coupon != nil {
		tot.Total = order.Amount * 0.9
	}
	var err error
	if buf, err = sr.AppendEncode(buf[:0], outputSubject, &tot); err != nil {
		return err
	}
	return out.Emit(guest.Output{Key: r.Key, Value: buf})
}
