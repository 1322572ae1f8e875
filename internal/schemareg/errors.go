package schemareg

import (
	"errors"
	"fmt"
)

// Kind classifies a failure. Unavailable and Refused are about the registry
// and may pass (retry the record); the others are about the record or the
// schema and give the same answer every time (dead-letter it).
type Kind int

const (
	// Unavailable: the registry did not answer in time, could not be
	// reached, or answered 5xx or 429.
	Unavailable Kind = iota + 1
	// Refused: the registry refused the credentials (401, 403).
	Refused
	// NotFound: no schema with this id, no such subject or version.
	NotFound
	// BadSchema: the registry's schema cannot be used (it does not
	// compile, is too large, has too many references, or is of a type
	// wasmstream does not read).
	BadSchema
	// BadFrame: the record's bytes are not a frame wasmstream reads
	// (package wire says which).
	BadFrame
	// Decode: the payload does not decode with its schema.
	Decode
	// Encode: the JSON does not fit the schema.
	Encode
)

func (k Kind) String() string {
	switch k {
	case Unavailable:
		return "registry_unavailable"
	case Refused:
		return "registry_refused"
	case NotFound:
		return "schema_not_found"
	case BadSchema:
		return "bad_schema"
	case BadFrame:
		return "bad_frame"
	case Decode:
		return "decode"
	case Encode:
		return "encode"
	}
	return "unknown"
}

// Error is every failure of the package: what failed (the schema id, the
// subject and version, the registry's URL and HTTP status when there was
// one) and what to do about it.
type Error struct {
	Kind     Kind
	SchemaID int    // 0 when none is known
	Subject  string // "" when none
	Version  int    // -1: latest; 0 when no subject
	URL      string // the registry URL asked, without credentials
	Status   int    // the HTTP status, 0 when there was no answer
	Msg      string
	Err      error
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// Retryable says whether the same record may succeed later: the registry
// was down or refused the credentials, which an operator can fix without
// the record changing.
func (e *Error) Retryable() bool { return e.Kind == Unavailable || e.Kind == Refused }

// Retryable reports whether err is a retryable *Error.
func Retryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retryable()
}

// SchemaID is the schema id err is about, for a failure header; ok is false
// when err names none.
func SchemaID(err error) (id int, ok bool) {
	var e *Error
	if errors.As(err, &e) && e.SchemaID != 0 {
		return e.SchemaID, true
	}
	return 0, false
}

func newErr(kind Kind, id int, err error, format string, args ...any) *Error {
	return &Error{Kind: kind, SchemaID: id, Err: err, Msg: fmt.Sprintf(format, args...)}
}
