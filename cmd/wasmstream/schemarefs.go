package main

// The references a schema file makes, for `wasmstream test` and `demo`:
// each is looked for beside the file that makes it, and served as a
// registry reference of that name, as a registry would resolve it.
//   - Protobuf: an import "money.proto" is the file money.proto beside it
//     (the import path relative to the file's directory);
//     google/protobuf/*.proto need none.
//   - JSON Schema: a "$ref" to a relative name ("address.json", or
//     "defs.json#/$defs/x") is that file beside it; refs within the file
//     ("#/...") and absolute URLs are the codec's (which fetches nothing).
//   - Avro: a named type the file uses and does not define ("com.acme.Money",
//     or "Money" in namespace com.acme) is the file com.acme.Money.avsc
//     beside it, or else Money.avsc: one type a file, named after it, as
//     Avro projects lay their schemas out.

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"
)

// fileRef is one reference of a schema file: its name in the schema (the
// registry reference's name), the file that answers it, and how the
// schema makes it, for messages.
type fileRef struct {
	name, path, verb string
}

// maxRefWalk bounds the nesting walked through a schema file's JSON for
// its references (the codecs refuse deeper schemas anyway).
const maxRefWalk = 256

// fileRefs lists the references file (its schema s) makes, each once.
// An Avro type no file beside it defines may be a typo as well as a
// reference: it is left to the codec, whose error gets missing, which says
// where the type was looked for.
func fileRefs(file string, s sr.Schema) (refs []fileRef, missing string) {
	dir := filepath.Dir(file)
	add := func(r fileRef) {
		for _, o := range refs {
			if o.name == r.name {
				return
			}
		}
		refs = append(refs, r)
	}
	switch s.Type {
	case sr.TypeProtobuf:
		for _, m := range protoImport.FindAllStringSubmatch(s.Schema, -1) {
			if !strings.HasPrefix(m[1], "google/protobuf/") {
				add(fileRef{m[1], filepath.Join(dir, filepath.FromSlash(m[1])), "imports"})
			}
		}
	case sr.TypeJSON:
		var doc any
		if json.Unmarshal([]byte(s.Schema), &doc) != nil {
			return nil, "" // the codec says what is wrong with it
		}
		for _, name := range jsonSchemaRefs(doc, nil, 0) {
			add(fileRef{name, filepath.Join(dir, filepath.FromSlash(name)), "refers to"})
		}
	case sr.TypeAvro:
		var doc any
		if json.Unmarshal([]byte(s.Schema), &doc) != nil {
			return nil, ""
		}
		for _, name := range avroUndefined(doc) {
			if path, looked := avroTypeFile(file, name); path != "" {
				add(fileRef{name, path, "uses type"})
			} else if missing == "" {
				missing = fmt.Sprintf(" (it uses the Avro type %s, which it does not define, and no file beside it does: looked for %s)", name, looked)
			}
		}
	}
	return refs, missing
}

// jsonSchemaRefs appends the names of the other files doc's "$ref"s name
// (without their fragments).
func jsonSchemaRefs(doc any, out []string, depth int) []string {
	if depth > maxRefWalk {
		return out
	}
	switch v := doc.(type) {
	case map[string]any:
		// In key order: the files are served in a stable order (their
		// subjects and ids the same each run).
		for _, k := range slices.Sorted(maps.Keys(v)) {
			x := v[k]
			if r, ok := x.(string); ok && k == "$ref" {
				name, _, _ := strings.Cut(r, "#")
				if u, err := url.Parse(name); err == nil && name != "" && !u.IsAbs() && !strings.HasPrefix(name, "/") {
					out = append(out, name)
				}
				continue
			}
			out = jsonSchemaRefs(x, out, depth+1)
		}
	case []any:
		for _, x := range v {
			out = jsonSchemaRefs(x, out, depth+1)
		}
	}
	return out
}

var avroPrimitive = map[string]bool{"null": true, "boolean": true, "int": true, "long": true, "float": true, "double": true, "bytes": true, "string": true}

// avroUndefined lists the full names of the named types doc uses and does
// not define, in the order it first uses them.
func avroUndefined(doc any) []string {
	defined := map[string]bool{}
	var used []string
	var walk func(v any, ns string, depth int)
	walk = func(v any, ns string, depth int) {
		if depth > maxRefWalk {
			return
		}
		switch t := v.(type) {
		case string:
			if !avroPrimitive[t] {
				used = append(used, avroFullName(t, ns))
			}
		case []any:
			for _, x := range t {
				walk(x, ns, depth+1)
			}
		case map[string]any:
			typ, _ := t["type"].(string)
			switch typ {
			case "record", "error", "enum", "fixed":
				name, _ := t["name"].(string)
				if n, ok := t["namespace"].(string); ok && !strings.Contains(name, ".") {
					ns = n
				}
				full := avroFullName(name, ns)
				defined[full] = true
				ns = ""
				if i := strings.LastIndexByte(full, '.'); i >= 0 {
					ns = full[:i]
				}
				fields, _ := t["fields"].([]any)
				for _, f := range fields {
					if fm, ok := f.(map[string]any); ok {
						walk(fm["type"], ns, depth+1)
					}
				}
			case "array":
				walk(t["items"], ns, depth+1)
			case "map":
				walk(t["values"], ns, depth+1)
			default:
				walk(t["type"], ns, depth+1)
			}
		}
	}
	walk(doc, "", 0)
	var out []string
	for _, u := range used {
		if !defined[u] {
			defined[u] = true // once
			out = append(out, u)
		}
	}
	return out
}

// avroFullName is a type name's full name in namespace ns.
func avroFullName(name, ns string) string {
	if strings.Contains(name, ".") || ns == "" {
		return name
	}
	return ns + "." + name
}

// avroTypeFile is the file beside file that defines the Avro type full:
// full.avsc, or else its simple name's .avsc; "" and the files looked for
// when neither is there.
func avroTypeFile(file, full string) (path, looked string) {
	dir := filepath.Dir(file)
	candidates := []string{filepath.Join(dir, full+".avsc")}
	if i := strings.LastIndexByte(full, '.'); i >= 0 {
		candidates = append(candidates, filepath.Join(dir, full[i+1:]+".avsc"))
	}
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			return c, ""
		}
	}
	return "", strings.Join(candidates, " and ")
}
