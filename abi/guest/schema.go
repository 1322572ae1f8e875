package guest

import "github.com/wasmstream/wasmstream/abi"

// Schema registry (ABI.md §7.3): the host's registry, for a processor
// that decodes or encodes records itself. The pipeline must grant it
// (async.schema_registry.enabled; a registration also its subject in
// register_subjects): otherwise the operation fails with an OpError that
// IsRefused. A registry that did not answer is an OpError that is not
// refused: the record may be retried.
//
//	return guest.Await(guest.SchemaByID(id), func(s *guest.Schema, err error) error {
//		if err != nil {
//			return err
//		}
//		... compile s.Schema (s.Type says which kind), cache it by id ...
//	})
//
// The host caches schemas by id, but each lookup is still an operation
// (a call back into the guest): keep what you compiled by id.

// The schema definition, as Redpanda's transform SDK has it.
type (
	SchemaType      = abi.SchemaType
	Schema          = abi.SchemaDef
	SchemaReference = abi.SchemaReference
	SubjectSchema   = abi.SubjectSchema
)

const (
	SchemaAvro     = abi.SchemaAvro
	SchemaProtobuf = abi.SchemaProtobuf
	SchemaJSON     = abi.SchemaJSON
)

// SchemaLatest is the version of SchemaBySubject that asks for the
// subject's latest.
const SchemaLatest = -1

// Registered is the result of RegisterSchema: the schema's id, and its
// version under the subject.
type Registered struct {
	ID, Version int
}

// SchemaByID looks up the schema of id: its type, text and direct
// references.
func SchemaByID(id int) Op[*Schema] {
	return Op[*Schema]{kind: abi.OpSchemaByID, req: abi.AppendSchemaByID(nil, id)}
}

// SchemaBySubject looks up the schema subject holds at version
// (SchemaLatest: its latest), with its id and the version it is.
func SchemaBySubject(subject string, version int) Op[*SubjectSchema] {
	return Op[*SubjectSchema]{kind: abi.OpSchemaBySubject, req: abi.AppendSchemaBySubject(nil, subject, version)}
}

// RegisterSchema registers s under subject (the registry's compatibility
// rules decide whether it may join the subject; its refusal is an OpError
// that IsRefused, with the registry's reason). A schema the subject holds
// already is answered with its id and version.
func RegisterSchema(subject string, s Schema) Op[Registered] {
	return Op[Registered]{kind: abi.OpSchemaRegister, req: abi.AppendSchemaRegister(nil, subject, &s)}
}

func decodeSchema(p []byte) (*Schema, error) {
	s, err := abi.DecodeSchemaDef(p)
	return &s, err
}

func decodeSubjectSchema(p []byte) (*SubjectSchema, error) {
	s, err := abi.DecodeSubjectSchema(p)
	return &s, err
}

func decodeRegistered(p []byte) (Registered, error) {
	id, version, err := abi.DecodeSchemaRegistered(p)
	return Registered{ID: id, Version: version}, err
}
