// Command goresolving is plugins/examples/avro-serde with structs of its
// own instead of the generated ones: every record decodes and encodes
// through sr's resolving path (twmb/avro, by the structs' avro tags), as
// a record whose schema differs from the generated one does.
// BenchmarkSDKSerde sets it beside the example.
package main

import (
	"time"

	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/sr"
)

func main() {}

type Order struct {
	ID       int64     `avro:"id"`
	Customer string    `avro:"customer"`
	Amount   float64   `avro:"amount"`
	PlacedAt time.Time `avro:"placed_at"`
	Items    []string  `avro:"items"`
	Coupon   *string   `avro:"coupon"`
	Priority int32     `avro:"priority"`
}

type OrderTotal struct {
	ID       int64     `avro:"id"`
	Customer string    `avro:"customer"`
	Items    int32     `avro:"items"`
	Total    float64   `avro:"total"`
	PlacedAt time.Time `avro:"placed_at"`
	Coupon   *string   `avro:"coupon"`
}

var (
	order Order
	tot   OrderTotal
	buf   []byte
)

func init() {
	sr.Process(func(r *guest.Record, out guest.Emitter) error {
		order = Order{Items: order.Items[:0]}
		if err := sr.Decode(r.Value, &order); err != nil {
			return err
		}
		tot = OrderTotal{ID: order.ID, Customer: order.Customer, Items: int32(len(order.Items)), Total: order.Amount, PlacedAt: order.PlacedAt, Coupon: order.Coupon}
		if order.Coupon != nil {
			tot.Total = order.Amount * 0.9
		}
		var err error
		if buf, err = sr.AppendEncode(buf[:0], "order-totals-value", &tot); err != nil {
			return err
		}
		return out.Emit(guest.Output{Key: r.Key, Value: buf})
	})
}
