//go:build integration

package schemareg_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/asyncop"
	"github.com/wasmstream/wasmstream/internal/schemareg"
)

const addrV1 = `{"type":"record","name":"Addr","namespace":"shop","fields":[{"name":"city","type":"string"}]}`

const customerV1 = `{"type":"record","name":"Customer","namespace":"shop","fields":[
 {"name":"name","type":"string"},
 {"name":"addr","type":"shop.Addr"}]}`

// completeOp starts op with req and waits for its completion.
func completeOp(t *testing.T, op asyncop.Operation, req []byte) abi.Completion {
	t.Helper()
	got := make(chan []byte, 1)
	if _, err := op.Start(context.Background(), req, func(r []byte) { got <- r }); err != nil {
		t.Fatalf("start: %v", err)
	}
	select {
	case r := <-got:
		c, err := abi.DecodeCompletion(r)
		if err != nil {
			t.Fatal(err)
		}
		return c
	case <-time.After(30 * time.Second):
		t.Fatal("no completion within 30s")
	}
	return abi.Completion{}
}

// The guests' schema-registry operations (ABI.md §7.3) against Apicurio:
// a registration under an allowed subject, a compatible second version,
// an incompatible one refused with the registry's reason (code 3), a
// schema with a reference registered and read back with it, lookups by
// subject (latest and a version) and by id, and an unknown id (code 3).
func TestApicurioAsyncSchemaOps(t *testing.T) {
	url, admin, run := registry(t)
	ctx := context.Background()
	client, err := schemareg.New(schemareg.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	section := asyncop.SchemaRegistry{Enabled: true, RegisterSubjects: []string{"guest-" + run + "-*"}}
	ops := section.Operations("pipelines.p.async.schema_registry", asyncop.Env{Schemas: client})
	register := func(subject string, def abi.SchemaDef) abi.Completion {
		return completeOp(t, ops[abi.OpSchemaRegister], abi.AppendSchemaRegister(nil, subject, &def))
	}
	registered := func(c abi.Completion) (int, int) {
		t.Helper()
		if c.Code != abi.CompletionOK {
			t.Fatalf("register: %+v", c)
		}
		id, version, err := abi.DecodeSchemaRegistered(c.Payload)
		if err != nil {
			t.Fatal(err)
		}
		return id, version
	}

	subject := "guest-" + run + "-orders-value"
	id1, v1 := registered(register(subject, abi.SchemaDef{Type: abi.SchemaAvro, Schema: orderV1}))
	for _, r := range admin.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatBackward}, subject) {
		if r.Err != nil {
			t.Fatalf("set BACKWARD: %v", r.Err)
		}
	}
	id2, v2 := registered(register(subject, abi.SchemaDef{Type: abi.SchemaAvro, Schema: orderV2}))
	if id1 == id2 || v1 != 1 || v2 != 2 {
		t.Fatalf("registered ids %d, %d versions %d, %d", id1, id2, v1, v2)
	}
	if c := register(subject, abi.SchemaDef{Type: abi.SchemaAvro, Schema: orderBreaking}); c.Code != abi.CompletionRefused || !strings.Contains(c.Message, subject) {
		t.Errorf("incompatible registration: %+v, want code 3 naming the subject", c)
	}
	if c := register("other-"+run+"-value", abi.SchemaDef{Type: abi.SchemaAvro, Schema: orderV1}); c.Code != abi.CompletionRefused || !strings.Contains(c.Message, "register_subjects") {
		t.Errorf("subject not allowed: %+v", c)
	}

	for _, tc := range []struct{ version, id, want int }{{-1, id2, 2}, {1, id1, 1}} {
		c := completeOp(t, ops[abi.OpSchemaBySubject], abi.AppendSchemaBySubject(nil, subject, tc.version))
		if c.Code != abi.CompletionOK {
			t.Fatalf("version %d: %+v", tc.version, c)
		}
		ss, err := abi.DecodeSubjectSchema(c.Payload)
		if err != nil || ss.ID != tc.id || ss.Version != tc.want || ss.Type != abi.SchemaAvro || !strings.Contains(ss.Schema, `"Order"`) {
			t.Fatalf("version %d: %+v %v", tc.version, ss, err)
		}
	}

	// A schema with a reference: registered by the guest, read back by id
	// with the reference the registry declares for it.
	addrSubject := "guest-" + run + "-addr"
	registered(register(addrSubject, abi.SchemaDef{Type: abi.SchemaAvro, Schema: addrV1}))
	ref := abi.SchemaReference{Name: "shop.Addr", Subject: addrSubject, Version: 1}
	custID, _ := registered(register("guest-"+run+"-customers-value", abi.SchemaDef{Type: abi.SchemaAvro, Schema: customerV1, References: []abi.SchemaReference{ref}}))
	c := completeOp(t, ops[abi.OpSchemaByID], abi.AppendSchemaByID(nil, custID))
	if c.Code != abi.CompletionOK {
		t.Fatalf("by id %d: %+v", custID, c)
	}
	def, err := abi.DecodeSchemaDef(c.Payload)
	if err != nil || def.Type != abi.SchemaAvro || !strings.Contains(def.Schema, `"Customer"`) || len(def.References) != 1 || def.References[0] != ref {
		t.Fatalf("by id %d: %+v %v", custID, def, err)
	}

	if c := completeOp(t, ops[abi.OpSchemaByID], abi.AppendSchemaByID(nil, 1<<30)); c.Code != abi.CompletionRefused || !strings.Contains(c.Message, "not found") {
		t.Errorf("unknown id: %+v, want code 3, not found", c)
	}
}
