package avrogen

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The generated files in the repository are what the generator writes
// from their schemas now: a change to the generator or a schema that is
// not regenerated fails here (go generate, or the commands in the files'
// packages, regenerate them).
func TestGeneratedFilesUpToDate(t *testing.T) {
	root := filepath.Join("..", "..")
	views := GoOptions{StringViews: true, IntTimestamps: true}
	for _, tc := range []struct {
		schema, lang, pkg, file string
		opt                     GoOptions
	}{
		{"plugins/examples/avro-serde/schemas/order.avsc", "go", "shop", "plugins/examples/avro-serde/shop/order_avro.go", views},
		{"plugins/examples/avro-serde/schemas/order-total.avsc", "go", "shop", "plugins/examples/avro-serde/shop/order_total_avro.go", views},
		{"abi/guest/sr/testdata/all.avsc", "go", "views", "abi/guest/sr/internal/views/all_avro.go", views},
		{"abi/guest/sr/testdata/all.avsc", "go", "sr_test", "abi/guest/sr/all_avro_test.go", GoOptions{}},
		{"plugins/examples/avro-serde/schemas/order.avsc", "rust", "", "plugins/examples/rust-avro-serde/src/order.rs", GoOptions{}},
		{"plugins/examples/avro-serde/schemas/order-total.avsc", "rust", "", "plugins/examples/rust-avro-serde/src/order_total.rs", GoOptions{}},
		{"plugins/examples/rust-avro-serde/tests/all.avsc", "rust", "", "plugins/examples/rust-avro-serde/tests/all_avro/mod.rs", GoOptions{}},
	} {
		text, err := os.ReadFile(filepath.Join(root, tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		if tc.lang == "go" {
			got, err = Go(text, tc.pkg, tc.opt)
		} else {
			got, err = Rust(text)
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.schema, err)
		}
		want, err := os.ReadFile(filepath.Join(root, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what wasmstream gen avro --lang %s writes from %s now: regenerate it", tc.file, tc.lang, tc.schema)
		}
	}
}

// What the codecs do not write is refused, naming the field, for both
// languages; so is a schema that is not a record.
func TestRefused(t *testing.T) {
	record := func(fieldType string) string {
		return `{"type":"record","name":"R","namespace":"n","fields":[{"name":"a","type":"long"},{"name":"f","type":` + fieldType + `}]}`
	}
	for _, tc := range []struct{ schema, want string }{
		{record(`{"type":"map","values":"long"}`), `n.R.f: type "map" is not generated`},
		{record(`{"type":"enum","name":"E","symbols":["A"]}`), `n.R.f: type "enum" is not generated`},
		{record(`{"type":"fixed","name":"F","size":4}`), `n.R.f: type "fixed" is not generated`},
		{record(`["null","long","string"]`), `n.R.f: only a union of null and one other type is generated`},
		{record(`["long","string"]`), `n.R.f: only a union of null and one other type is generated`},
		{record(`{"type":"fixed","name":"D","size":8,"logicalType":"decimal","precision":4,"scale":2}`), `n.R.f: logical type "decimal" on "fixed" is not generated`},
		{record(`{"type":"int","logicalType":"date"}`), `n.R.f: logical type "date" on "int" is not generated`},
		{record(`{"type":"array","items":{"type":"map","values":"int"}}`), `n.R.f[]: type "map" is not generated`},
		{record(`{"type":"record","name":"E","fields":[]}`), `n.R.f: record n.E has no fields`},
		{`"string"`, "the schema is not a record"},
		{`{"type":"record"`, "the schema does not parse"},
	} {
		for lang, gen := range map[string]func([]byte) ([]byte, error){
			"go":   func(b []byte) ([]byte, error) { return Go(b, "p", GoOptions{}) },
			"rust": Rust,
		} {
			if _, err := gen([]byte(tc.schema)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %s: %v, want an error saying %q", lang, tc.schema, err, tc.want)
			}
		}
	}
	if _, err := Rust([]byte(record(`["null","bytes"]`))); err == nil || !strings.Contains(err.Error(), "n.R.f: bytes (a decimal's too) are not generated for Rust") {
		t.Errorf("rust bytes: %v", err)
	}
	if _, err := Rust([]byte(record(`{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}`))); err == nil || !strings.Contains(err.Error(), "n.R.f: bytes (a decimal's too) are not generated for Rust") {
		t.Errorf("rust decimal: %v", err)
	}
}
