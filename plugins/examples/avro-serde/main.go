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
	"time"

	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/sr"
)

func main() {}

// Order is schemas/order.avsc.
type Order struct {
	ID       int64     `avro:"id"`
	Customer string    `avro:"customer"`
	Amount   float64   `avro:"amount"`
	PlacedAt time.Time `avro:"placed_at"`
	Items    []string  `avro:"items"`
	Coupon   *string   `avro:"coupon"`
	Priority int32     `avro:"priority"`
}

// OrderTotal is schemas/order-total.avsc.
type OrderTotal struct {
	ID       int64     `avro:"id"`
	Customer string    `avro:"customer"`
	Items    int32     `avro:"items"`
	Total    float64   `avro:"total"`
	PlacedAt time.Time `avro:"placed_at"`
	Coupon   *string   `avro:"coupon"`
}

// outputSubject is the subject whose latest schema the output is written
// with.
var outputSubject = "order-totals-value"

// The buffers are reused from record to record: Emit copies.
var (
	order Order
	buf   []byte
)

func init() {
	if s := os.Getenv("OUTPUT_SUBJECT"); s != "" {
		outputSubject = s
	}
	sr.Process(total)
}

func total(r *guest.Record, out guest.Emitter) error {
	order = Order{Items: order.Items[:0]}
	if err := sr.Decode(r.Value, &order); err != nil {
		return err
	}
	t := OrderTotal{ID: order.ID, Customer: order.Customer, Items: int32(len(order.Items)), Total: order.Amount, PlacedAt: order.PlacedAt, Coupon: order.Coupon}
	if order.Coupon != nil {
		t.Total = order.Amount * 0.9
	}
	var err error
	if buf, err = sr.AppendEncode(buf[:0], outputSubject, &t); err != nil {
		return err
	}
	return out.Emit(guest.Output{Key: r.Key, Value: buf})
}
