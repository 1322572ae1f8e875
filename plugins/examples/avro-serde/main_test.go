//go:build !wasip1

package main

import (
	"encoding/binary"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/avro"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/plugins/examples/avro-serde/shop"
)

func schemaFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("schemas/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// An Order framed as a producer's serializer frames it becomes its
// OrderTotal, framed with the output subject's latest schema; a value
// without a frame fails terminally.
func TestAvroSerde(t *testing.T) {
	orderSchema, totalSchema := schemaFile(t, "order.avsc"), schemaFile(t, "order-total.avsc")
	inID, _ := guest.AddTestSchema("orders-value", guest.Schema{Type: guest.SchemaAvro, Schema: orderSchema})
	outID, _ := guest.AddTestSchema("order-totals-value", guest.Schema{Type: guest.SchemaAvro, Schema: totalSchema})
	coupon := "SPRING"
	placed := int64(1700000000123) // timestamp-millis, as generated (--timestamps int64)
	for _, tc := range []struct {
		in   shop.Order
		want shop.OrderTotal
	}{
		{shop.Order{ID: 1, Customer: "ada", Amount: 20, PlacedAt: placed, Items: []string{"tea", "cake"}, Coupon: &coupon, Priority: 2},
			shop.OrderTotal{ID: 1, Customer: "ada", Items: 2, Total: 18, PlacedAt: placed, Coupon: &coupon}},
		{shop.Order{ID: 2, Customer: "bob", Amount: 7.5, PlacedAt: placed, Items: []string{}},
			shop.OrderTotal{ID: 2, Customer: "bob", Items: 0, Total: 7.5, PlacedAt: placed}},
	} {
		value := binary.BigEndian.AppendUint32([]byte{0}, uint32(inID))
		value, err := avro.MustParse(orderSchema).AppendEncode(value, &tc.in)
		if err != nil {
			t.Fatal(err)
		}
		res := guest.Run(abi.Record{Topic: "orders", Key: []byte("k"), Value: value})
		if res.Status != abi.StatusOK || len(res.Outputs) != 1 {
			t.Fatalf("order %d: %v %v, %d outputs", tc.in.ID, res.Status, res.Err, len(res.Outputs))
		}
		v := res.Outputs[0].Value
		if len(v) < 5 || v[0] != 0 || int(binary.BigEndian.Uint32(v[1:5])) != outID {
			t.Fatalf("order %d: output frame %x, want schema %d", tc.in.ID, v[:min(5, len(v))], outID)
		}
		var got shop.OrderTotal
		if rest, err := avro.MustParse(totalSchema).Decode(v[5:], &got); err != nil || len(rest) > 0 {
			t.Fatalf("order %d: output %x: %v, %d bytes left", tc.in.ID, v, err, len(rest))
		}
		if !reflect.DeepEqual(got, tc.want) || string(res.Outputs[0].Key) != "k" {
			t.Fatalf("order %d: %+v, want %+v", tc.in.ID, got, tc.want)
		}
	}
	res := guest.Run(abi.Record{Topic: "orders", Value: []byte(`{"id":1}`)})
	if res.Status != abi.StatusFail || !strings.Contains(res.Err.Error(), "not framed") {
		t.Fatalf("plain JSON: %v %v, want a terminal failure saying it is not framed", res.Status, res.Err)
	}
}
