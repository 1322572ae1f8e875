package jsoncodec

import (
	"strings"
	"testing"
)

const orderSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
 "properties":{"id":{"type":"integer"},"items":{"type":"array","items":{"type":"string"}},"ship_to":{"$ref":"address.json"}},
 "required":["id"],"additionalProperties":false}`

const addressSchema = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`

func TestValidateAndPassThrough(t *testing.T) {
	c, err := Compile(orderSchema, map[string]string{"address.json": addressSchema}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	in := `{"id":1, "items":["a"], "ship_to":{"city":"Oslo"}}`
	out, err := c.AppendJSON([]byte("x"), []byte(in), 1<<10)
	if err != nil || string(out) != "x"+in {
		t.Fatalf("pass through: %s %v", out, err)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"id":"1"}`, "/id"},
		{`{"id":1,"items":["a",2]}`, "/items/1"},
		{`{"id":1,"ship_to":{}}`, "city"},
		{`{"id":1,"extra":true}`, "extra"},
		{`{"items":[]}`, "id"},
		{`{"id":1`, "not JSON"},
		{strings.Repeat("[", 100), "nested deeper than 64"},
	} {
		_, err := c.AppendBinary(nil, []byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.30s: %v, want it to say %q", tc.in, err, tc.want)
		}
	}
	if _, err := c.AppendJSON(nil, []byte(in), 10); err == nil || !strings.Contains(err.Error(), "size limit") {
		t.Errorf("size limit: %v", err)
	}
}

func TestCompileRefusals(t *testing.T) {
	if _, err := Compile(orderSchema, nil, Limits{}); err == nil || !strings.Contains(err.Error(), "address.json") || !strings.Contains(err.Error(), "nothing is fetched") {
		t.Errorf("missing reference: %v", err)
	}
	if _, err := Compile(`{"$ref":"https://example.com/x.json"}`, nil, Limits{}); err == nil {
		t.Errorf("a remote reference was resolved")
	}
	if _, err := Compile(`{"$ref":"file:///etc/passwd"}`, nil, Limits{}); err == nil {
		t.Errorf("a file reference was resolved")
	}
	deep := strings.Repeat(`{"items":`, 300) + "{}" + strings.Repeat("}", 300)
	if _, err := Compile(deep, nil, Limits{}); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("deep schema: %v", err)
	}
	// A self-referencing schema compiles and validates finitely.
	c, err := Compile(`{"type":"object","properties":{"next":{"$ref":"#"}}}`, nil, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate([]byte(`{"next":{"next":{"next":{}}}}`), 0); err != nil {
		t.Fatal(err)
	}
}

func FuzzJSONSchemaDecode(f *testing.F) {
	c, err := Compile(orderSchema, map[string]string{"address.json": addressSchema}, Limits{})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"id":1, "items":["a"], "ship_to":{"city":"Oslo"}}`))
	f.Add([]byte(`[[[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := c.AppendJSON(nil, b, 1<<16)
		if err == nil && string(out) != string(b) {
			t.Fatalf("changed %q to %q", b, out)
		}
	})
}

// RefName names a reference's reference as the main schema's codec
// resolves it: relative to the reference that makes it.
func TestRefName(t *testing.T) {
	for _, tc := range []struct{ from, name, want string }{
		{"", "price.json", "price.json"},
		{"", "parts/item.json", "parts/item.json"},
		{"parts/item.json", "price.json", "parts/price.json"},
		{"parts/item.json", "../money.json", "money.json"},
		{"parts/item.json", "price.json#/$defs/cents", "parts/price.json"},
		{"a/b/c.json", "d/e.json", "a/b/d/e.json"},
		{"parts/item.json", "https://schemas.example/price.json", "https://schemas.example/price.json"},
		{"https://schemas.example/a/item.json", "price.json", "https://schemas.example/a/price.json"},
	} {
		if got := RefName(tc.from, tc.name); got != tc.want {
			t.Errorf("RefName(%q, %q) = %q, want %q", tc.from, tc.name, got, tc.want)
		}
	}
}
