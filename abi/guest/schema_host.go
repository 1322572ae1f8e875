//go:build !wasip1

package guest

import (
	"fmt"
	"slices"

	"github.com/wasmstream/wasmstream/abi"
)

// On the host side (Run, in a processor's tests) the schema operations
// read an in-memory registry, filled with AddTestSchema: there is no
// pipeline config here, so every operation is granted, registrations
// included.

// testSchemas is the in-memory registry: schemas by id, and each
// subject's ids by version (version 1 first).
var testSchemas = struct {
	byID     []Schema // id i at i-1
	subjects map[string][]int
}{subjects: map[string][]int{}}

// AddTestSchema adds s to subject as its next version, as a registration
// would: a schema of the same type and text keeps the id it has under any
// subject, and one the subject holds already keeps its version.
func AddTestSchema(subject string, s Schema) (id, version int) {
	id = slices.IndexFunc(testSchemas.byID, func(o Schema) bool { return o.Type == s.Type && o.Schema == s.Schema }) + 1
	if id == 0 {
		s.References = slices.Clone(s.References)
		testSchemas.byID = append(testSchemas.byID, s)
		id = len(testSchemas.byID)
	}
	versions := testSchemas.subjects[subject]
	if i := slices.Index(versions, id); i >= 0 {
		return id, i + 1
	}
	testSchemas.subjects[subject] = append(versions, id)
	return id, len(versions) + 1
}

// ResetTestSchemas empties the in-memory registry.
func ResetTestSchemas() {
	testSchemas.byID = nil
	testSchemas.subjects = map[string][]int{}
}

// startSchemaOp answers a schema operation at async_start from the
// in-memory registry: its result, or the errno async_start would.
func startSchemaOp(kind abi.OpKind, req []byte) ([]byte, error) {
	notFound := func(format string, args ...any) []byte {
		return abi.AppendCompletionError(nil, abi.CompletionRefused, "schema registry: "+fmt.Sprintf(format, args...)+": not found (the test registry: AddTestSchema)")
	}
	ok := []byte{abi.CompletionOK}
	switch kind {
	case abi.OpSchemaByID:
		id, err := abi.DecodeSchemaByID(req)
		if err != nil {
			return nil, abi.ErrnoBadEncoding
		}
		if id < 1 || id > len(testSchemas.byID) {
			return notFound("schema id %d", id), nil
		}
		return abi.AppendSchemaDef(ok, &testSchemas.byID[id-1]), nil
	case abi.OpSchemaBySubject:
		subject, version, err := abi.DecodeSchemaBySubject(req)
		if err != nil {
			return nil, abi.ErrnoBadEncoding
		}
		versions := testSchemas.subjects[subject]
		if version == SchemaLatest {
			version = len(versions)
		}
		if version < 1 || version > len(versions) {
			return notFound("subject %q version %d", subject, version), nil
		}
		id := versions[version-1]
		ss := SubjectSchema{ID: id, Version: version, SchemaDef: testSchemas.byID[id-1]}
		return abi.AppendSubjectSchema(ok, &ss), nil
	default:
		subject, s, err := abi.DecodeSchemaRegister(req)
		if err != nil {
			return nil, abi.ErrnoBadEncoding
		}
		id, version := AddTestSchema(subject, s)
		return abi.AppendSchemaRegistered(ok, id, version), nil
	}
}
