package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A schema file that references another, in each schema type, is served
// with the file beside it as its registry reference, and the record takes
// the host's path through both (an Avro named type in its own file, a
// JSON Schema $ref to another file, and from that file to one beside it
// in its directory, a Protobuf import from a directory
// beside it); a reference that no file answers stops the test before it
// runs, naming the reference, the file that makes it and where it was
// looked for.
func TestTestCommandSchemaReferences(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mod := writeFile(t, dir, "uppercase.wasm", uppercaseWasm(t))
	sdir := filepath.Join(dir, "schemas")
	if err := os.MkdirAll(filepath.Join(sdir, "common"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Avro: shop.Order uses shop.Money (Money.avsc: the simple name) and
	// shop.Status (shop.Status.avsc: the full name), which uses nothing.
	writeFile(t, sdir, "order.avsc", []byte(`{"type": "record", "name": "Order", "namespace": "shop", "fields": [
  {"name": "id", "type": "string"}, {"name": "total", "type": "Money"}, {"name": "status", "type": "shop.Status"},
  {"name": "refund", "type": ["null", "Money"], "default": null}]}`))
	writeFile(t, sdir, "Money.avsc", []byte(`{"type": "record", "name": "Money", "namespace": "shop", "fields": [{"name": "cents", "type": "long"}, {"name": "status", "type": "Status"}]}`))
	writeFile(t, sdir, "shop.Status.avsc", []byte(`{"type": "enum", "name": "Status", "namespace": "shop", "symbols": ["NEW", "PAID"]}`))
	writeFile(t, sdir, "lost.avsc", []byte(`{"type": "record", "name": "Lost", "fields": [{"name": "x", "type": "com.acme.Gone"}]}`))
	// JSON Schema: a $ref to a file, with a fragment, and one within it.
	writeFile(t, sdir, "order.json", []byte(`{"type": "object", "properties": {"id": {"type": "string"}, "total": {"$ref": "money.json"}, "note": {"$ref": "defs.json#/$defs/note"}}, "required": ["id", "total"]}`))
	writeFile(t, sdir, "money.json", []byte(`{"type": "object", "properties": {"cents": {"type": "integer"}}, "required": ["cents"]}`))
	writeFile(t, sdir, "defs.json", []byte(`{"$defs": {"note": {"type": "string", "maxLength": 8}}}`))
	writeFile(t, sdir, "lost.json", []byte(`{"type": "object", "properties": {"x": {"$ref": "gone.json#/x"}}}`))
	// A referenced file's own $refs are relative to it: parts/item.json's
	// "price.json" is parts/price.json.
	if err := os.MkdirAll(filepath.Join(sdir, "parts"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, sdir, "shipment.json", []byte(`{"type": "object", "properties": {"item": {"$ref": "parts/item.json"}}, "required": ["item"]}`))
	writeFile(t, filepath.Join(sdir, "parts"), "item.json", []byte(`{"type": "object", "properties": {"price": {"$ref": "price.json"}}, "required": ["price"]}`))
	writeFile(t, filepath.Join(sdir, "parts"), "price.json", []byte(`{"type": "integer", "minimum": 0}`))
	// Protobuf: an import path with a directory, relative to the file's.
	writeFile(t, filepath.Join(sdir, "common"), "money.proto", []byte("syntax = \"proto3\";\npackage common;\nmessage Money { int64 cents = 1; }\n"))
	writeFile(t, sdir, "order.proto", []byte("syntax = \"proto3\";\npackage shop;\nimport \"common/money.proto\";\nmessage Order { string id = 1; common.Money total = 2; }\n"))

	vectors := writeFile(t, dir, "v.jsonl", []byte(`{"name": "avro", "value_schema": "schemas/order.avsc", "value": {"id": "x", "total": {"cents": 5, "status": "NEW"}, "status": "PAID", "refund": {"shop.Money": {"cents": 1, "status": "NEW"}}}, "expect": {"outcome": "ok", "outputs": [{"value": {"ID": "X", "TOTAL": {"CENTS": 5, "STATUS": "NEW"}, "STATUS": "PAID", "REFUND": {"CENTS": 1, "STATUS": "NEW"}}}]}}
{"name": "json schema", "value_schema": "schemas/order.json", "value": {"id": "y", "total": {"cents": 6}, "note": "hi"}, "expect": {"outcome": "ok", "outputs": [{"value": {"ID": "Y", "TOTAL": {"CENTS": 6}, "NOTE": "HI"}}]}}
{"name": "json schema, nested", "value_schema": "schemas/shipment.json", "value": {"item": {"price": 3}}, "expect": {"outcome": "ok", "outputs": [{"value": {"ITEM": {"PRICE": 3}}}]}}
{"name": "protobuf", "value_schema": "schemas/order.proto", "value": {"id": "z", "total": {"cents": "7"}}, "expect": {"outcome": "ok", "outputs": [{"value": {"ID": "Z", "TOTAL": {"CENTS": "7"}}}]}}
`))
	code, out, errs := runCLI(t, "test", mod, "--file", vectors)
	if code != 0 || strings.Count(out, "expect: PASS") != 4 {
		t.Fatalf("code %d, want 0 and 4 passed\n%s\n%s", code, out, errs)
	}
	// Through the reference: a value the referenced schema refuses.
	bad := writeFile(t, dir, "bad.jsonl", []byte(`{"value_schema": "schemas/order.json", "value": {"id": "y", "total": {"cents": "six"}}}`+"\n"))
	if code, out, errs := runCLI(t, "test", mod, "--file", bad); code != 2 || !strings.Contains(errs, "/total/cents") {
		t.Errorf("a value the referenced schema refuses: code %d\n%s\n%s", code, out, errs)
	}
	// Through the nested reference.
	bad = writeFile(t, dir, "bad2.jsonl", []byte(`{"value_schema": "schemas/shipment.json", "value": {"item": {"price": -1}}}`+"\n"))
	if code, out, errs := runCLI(t, "test", mod, "--file", bad); code != 2 || !strings.Contains(errs, "/item/price") {
		t.Errorf("a value the nested reference refuses: code %d\n%s\n%s", code, out, errs)
	}
	if code, out, errs := runCLI(t, "test", mod, "--file", writeFile(t, dir, "s2.jsonl", []byte(`{"value_subject": "shipments-value", "value": {"item": {"price": 4}}}`+"\n")),
		"--schema", "shipments-value="+filepath.Join(sdir, "shipment.json")); code != 0 || !strings.Contains(out, `\"PRICE\":4`) {
		t.Errorf("--schema with nested references: code %d\n%s\n%s", code, out, errs)
	}

	for name, want := range map[string]string{
		"lost.avsc": filepath.Join(sdir, "lost.avsc") + " is not a schema wasmstream reads as Avro: ", // the codec's reason, then:
		"lost.avsc ": "(it uses the Avro type com.acme.Gone, which it does not define, and no file beside it does: looked for " +
			filepath.Join(sdir, "com.acme.Gone.avsc") + " and " + filepath.Join(sdir, "Gone.avsc") + ")",
		"lost.json": filepath.Join(sdir, "lost.json") + " refers to gone.json (looked for beside it): stat " + filepath.Join(sdir, "gone.json"),
	} {
		v := writeFile(t, dir, "lost.jsonl", []byte(`{"value_schema": "schemas/`+strings.TrimSpace(name)+`", "value": {"x": 1}}`+"\n"))
		if code, out, errs := runCLI(t, "test", mod, "--file", v); code != 2 || !strings.Contains(errs, want) {
			t.Errorf("%s: code %d, want 2 and %q\n%s\n%s", name, code, want, out, errs)
		}
	}
	// --schema takes the same references.
	if code, out, errs := runCLI(t, "test", mod, "--file", writeFile(t, dir, "s.jsonl", []byte(`{"value_subject": "orders-value", "value": {"id": "x", "total": {"cents": 5, "status": "NEW"}, "status": "NEW", "refund": null}}`+"\n")),
		"--schema", "orders-value="+filepath.Join(sdir, "order.avsc")); code != 0 || !strings.Contains(out, `\"TOTAL\":{\"CENTS\":5,\"STATUS\":\"NEW\"}`) {
		t.Errorf("--schema with references: code %d\n%s\n%s", code, out, errs)
	}
	if code, _, errs := runCLI(t, "test", mod, "--file", vectors, "--schema", "lost-value="+filepath.Join(sdir, "lost.json")); code != 2 ||
		!strings.Contains(errs, "--schema lost-value="+filepath.Join(sdir, "lost.json")+": "+filepath.Join(sdir, "lost.json")+" refers to gone.json") {
		t.Errorf("--schema with a missing reference: code %d\n%s", code, errs)
	}
}
