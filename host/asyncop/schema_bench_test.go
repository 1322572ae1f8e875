package asyncop

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/wasmstream/wasmstream/abi"
)

// BenchmarkSchemaLookupCached is a guest's lookup of a schema the host
// holds already (by id: the client's cache; by subject: the module's
// answer, then the cache by id), from Start to the encoded result: what a
// processor that looks its schema up per record costs the host, with no
// registry request.
func BenchmarkSchemaLookupCached(b *testing.B) {
	reg := srfake.New()
	defer reg.Close()
	reg.SeedSchema("addr", 1, 3, sr.Schema{Schema: addrAvro, Type: sr.TypeAvro})
	reg.SeedSchema("users-value", 1, 4, sr.Schema{Schema: userAvro, Type: sr.TypeAvro, References: []sr.SchemaReference{{Name: "x.Addr", Subject: "addr", Version: 1}}})
	client := schemaClient(b, reg.URL(), 5*time.Second)
	ops := schemaOps(SchemaRegistry{Enabled: true}, client)
	for _, bc := range []struct {
		name string
		kind abi.OpKind
		req  []byte
	}{
		{"by_id", abi.OpSchemaByID, abi.AppendSchemaByID(nil, 4)},
		{"by_subject_latest", abi.OpSchemaBySubject, abi.AppendSchemaBySubject(nil, "users-value", -1)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			op := ops[bc.kind]
			got := make(chan []byte, 1)
			done := func(r []byte) { got <- r }
			lookup := func() {
				if _, err := op.Start(context.Background(), bc.req, done); err != nil {
					b.Fatal(err)
				}
				if r := <-got; r[0] != abi.CompletionOK {
					b.Fatalf("completion %q", r)
				}
			}
			lookup() // the registry asked once
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				lookup()
			}
		})
	}
}
