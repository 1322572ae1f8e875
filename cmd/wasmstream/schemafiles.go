package main

// Schema files for `wasmstream test` and `wasmstream demo`: an in-process
// registry (franz-go's srfake, Confluent's REST API on a loopback port)
// serves them, and stands in for schema_registry.url, so that records are
// framed, decoded and encoded by the host's own registry client and
// codecs, offline, exactly as against a real registry.

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/wasmstream/wasmstream/internal/conformance"
	"github.com/wasmstream/wasmstream/internal/schemareg/avrocodec"
	"github.com/wasmstream/wasmstream/internal/schemareg/jsoncodec"
	"github.com/wasmstream/wasmstream/internal/schemareg/protocodec"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// maxSchemaFile bounds a schema file read (the registry's own default
// bound on a schema's text).
const maxSchemaFile = 1 << 20

// schemaFlag is --schema SUBJECT=FILE, repeatable.
type schemaFlag struct {
	subjects []string
	files    []string
}

func (f *schemaFlag) String() string { return strings.Join(f.files, ",") }

func (f *schemaFlag) Set(v string) error {
	subject, file, ok := strings.Cut(v, "=")
	if !ok || subject == "" || file == "" {
		return fmt.Errorf("%q: want SUBJECT=FILE, e.g. orders-value=schemas/order.avsc", v)
	}
	f.subjects, f.files = append(f.subjects, subject), append(f.files, file)
	return nil
}

const schemaFlagUsage = "serve FILE (.avsc Avro, .proto Protobuf, .json JSON Schema) as SUBJECT's schema, SUBJECT=FILE (repeatable), from a registry in this process that stands in for schema_registry.url: no registry needed"

// localRegistry serves schema files. Close stops it.
type localRegistry struct {
	reg *srfake.Registry
	cfg *config.SchemaRegistry // the codecs' options the files are checked with
	// byFile is the subject a file named by a vector is served as;
	// bySubject the file a --schema subject is served from.
	byFile, bySubject map[string]string
}

// newLocalRegistry starts a registry serving the --schema files; the
// files are checked with the codecs of sc's options first, so a schema
// that does not compile is refused here, naming its file.
func newLocalRegistry(f *schemaFlag, sc *config.SchemaRegistry) (*localRegistry, error) {
	l := &localRegistry{reg: srfake.New(), cfg: sc, byFile: map[string]string{}, bySubject: map[string]string{}}
	// Read only: the files are registered in process, and no other
	// process on the machine may change what the host reads.
	l.reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			return false
		}
		http.Error(w, `{"error_code":405,"message":"read only: the schema files of this wasmstream process"}`, http.StatusMethodNotAllowed)
		return true
	})
	for i, file := range f.files {
		if err := l.serve(f.subjects[i], file, "--schema "+f.subjects[i]+"="+file); err != nil {
			l.Close()
			return nil, err
		}
		l.bySubject[f.subjects[i]] = file
	}
	return l, nil
}

// URL is the registry's address, for schema_registry.url.
func (l *localRegistry) URL() string { return l.reg.URL() }

// Close stops the registry.
func (l *localRegistry) Close() { l.reg.Close() }

// serve registers file as a version of subject (a file already served
// under it is the same version); what names the file in errors.
func (l *localRegistry) serve(subject, file, what string) error {
	s, err := readSchemaFile(file, l.cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if _, _, err := l.reg.RegisterSchema(subject, s); err != nil {
		return fmt.Errorf("%s: %v", what, err)
	}
	return nil
}

// subjectFile is the file a --schema subject is served from: "" for
// another subject, or without files (l nil).
func (l *localRegistry) subjectFile(subject string) string {
	if l == nil {
		return ""
	}
	return l.bySubject[subject]
}

// fileSubject is the subject the schema file path (as a vector names it,
// resolved) is served as: one of its own, registered at the first call.
func (l *localRegistry) fileSubject(path, what string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if s, ok := l.byFile[abs]; ok {
		return s, nil
	}
	subject := fmt.Sprintf("file-%d-%s", len(l.byFile)+1, filepath.Base(path))
	if err := l.serve(subject, path, what); err != nil {
		return "", err
	}
	l.byFile[abs] = subject
	return subject, nil
}

// readSchemaFile reads a schema file, of the type its extension says,
// and compiles it as the host would (with sc's options), so that a schema
// that does not compile is an error naming the file and the codec's
// reason.
func readSchemaFile(file string, sc *config.SchemaRegistry) (sr.Schema, error) {
	ext := strings.ToLower(filepath.Ext(file))
	typ, ok := conformance.SchemaExts[ext]
	if !ok {
		return sr.Schema{}, fmt.Errorf("%s: want a schema file ending in .avsc (Avro), .proto (Protobuf) or .json (JSON Schema)", file)
	}
	st, err := os.Stat(file)
	if err != nil {
		return sr.Schema{}, err
	}
	if st.Size() > maxSchemaFile {
		return sr.Schema{}, fmt.Errorf("%s: %d bytes, more than a schema may be (%d)", file, st.Size(), maxSchemaFile)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return sr.Schema{}, err
	}
	text := string(b)
	s := sr.Schema{Schema: text}
	switch typ {
	case "AVRO":
		s.Type = sr.TypeAvro
		_, err = avrocodec.Compile(text, nil, avrocodec.Options{TaggedUnions: sc.Avro.TaggedUnions, RawLogicalTypes: sc.Avro.RawLogicalTypes}, avrocodec.Limits{})
	case "PROTOBUF":
		s.Type = sr.TypeProtobuf
		_, err = protocodec.Compile(text, nil, protocodec.Options{JSONNames: sc.Protobuf.JSONNames}, protocodec.Limits{})
	default:
		s.Type = sr.TypeJSON
		_, err = jsoncodec.Compile(text, nil, jsoncodec.Limits{})
	}
	if err != nil {
		return sr.Schema{}, fmt.Errorf("%s is not a schema wasmstream reads as %s: %v", file, map[string]string{"AVRO": "Avro", "PROTOBUF": "Protobuf", "JSON": "JSON Schema"}[typ], err)
	}
	return s, nil
}
