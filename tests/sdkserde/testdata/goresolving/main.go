// Command goresolving is plugins/examples/avro-serde with structs that
// have no codec of their own: every record decodes and encodes through
// sr's resolving path (twmb/avro, by the structs' avro tags), as a record
// whose schema differs from the generated one does. The structs are the
// example's generated ones (plugins/examples/avro-serde/shop) as types of their own,
// which have their fields and tags but not their methods.
// BenchmarkSDKSerde sets it beside the example.
package main

import (
	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/sr"
	"github.com/wasmstream/wasmstream/plugins/examples/avro-serde/shop"
)

func main() {}

type (
	Order      shop.Order
	OrderTotal shop.OrderTotal
)

var (
	ord Order
	tot OrderTotal
	buf []byte
)

func init() {
	sr.Process(func(r *guest.Record, out guest.Emitter) error {
		if err := sr.Decode(r.Value, &ord); err != nil { // zeroes ord first
			return err
		}
		tot.ID, tot.Customer, tot.PlacedAt, tot.Coupon = ord.ID, ord.Customer, ord.PlacedAt, ord.Coupon
		tot.Items, tot.Total = int32(len(ord.Items)), ord.Amount
		if ord.Coupon != nil {
			tot.Total = ord.Amount * 0.9
		}
		var err error
		if buf, err = sr.AppendEncode(buf[:0], "order-totals-value", &tot); err != nil {
			return err
		}
		return out.Emit(guest.Output{Key: r.Key, Value: buf})
	})
}
