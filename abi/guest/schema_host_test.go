//go:build !wasip1

package guest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
)

// A processor reads schemas by subject and by id and registers one, each
// through Await, on the host side with the test registry: the results
// decode to what was registered (the references included), the latest
// version follows a registration, and an unknown subject is an OpError
// that IsRefused.
func TestSchemaOpsOnHost(t *testing.T) {
	ResetTestSchemas()
	t.Cleanup(func() { processor = nil; ResetTestSchemas() })
	ref := []SchemaReference{{Name: "x.Addr", Subject: "addr", Version: 1}}
	AddTestSchema("addr", Schema{Type: SchemaAvro, Schema: `{"type":"record","name":"Addr","namespace":"x","fields":[]}`})
	userID, _ := AddTestSchema("users-value", Schema{Type: SchemaAvro, Schema: `{"type":"record","name":"User","fields":[{"name":"a","type":"x.Addr"}]}`, References: ref})
	var got []string
	processor = func(r *Record, out Emitter) error {
		subject := string(r.Key)
		switch string(r.Value) {
		case "register":
			return Await(RegisterSchema(subject, Schema{Type: SchemaJSON, Schema: `{"type":"object"}`}), func(reg Registered, err error) error {
				got = append(got, "registered", strconv.Itoa(reg.ID), strconv.Itoa(reg.Version))
				return err
			})
		}
		return Await(SchemaBySubject(subject, SchemaLatest), func(ss *SubjectSchema, err error) error {
			if err != nil {
				got = append(got, "error", err.Error(), strconv.FormatBool(IsRefused(err)))
				return Terminal(err)
			}
			return Await(SchemaByID(ss.ID), func(s *Schema, err error) error {
				if err != nil {
					return err
				}
				got = append(got, strconv.Itoa(ss.ID), strconv.Itoa(ss.Version), s.Type.String(), strconv.Itoa(len(s.References)))
				if len(s.References) > 0 && s.References[0] != ref[0] {
					t.Errorf("reference %+v, want %+v", s.References[0], ref[0])
				}
				return nil
			})
		})
	}
	run := func(key, value string) Result {
		return Run(abi.Record{Topic: "in", Key: []byte(key), Value: []byte(value)})
	}
	if res := run("users-value", ""); res.Status != abi.StatusOK {
		t.Fatalf("lookup: %v %v", res.Status, res.Err)
	}
	if res := run("users-value", "register"); res.Status != abi.StatusOK {
		t.Fatalf("register: %v %v", res.Status, res.Err)
	}
	if res := run("users-value", ""); res.Status != abi.StatusOK {
		t.Fatalf("lookup after register: %v %v", res.Status, res.Err)
	}
	want := strconv.Itoa(userID) + " 1 AVRO 1 registered 3 2 3 2 JSON 0"
	if s := strings.Join(got, " "); s != want {
		t.Fatalf("got %q\nwant %q", s, want)
	}
	got = nil
	res := run("nobody-value", "")
	if res.Status == abi.StatusOK || len(got) != 3 || !strings.Contains(got[1], "not found") || got[2] != "true" {
		t.Fatalf("unknown subject: %v %v %q", res.Status, res.Err, got)
	}
}
