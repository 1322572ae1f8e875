package main

// Schema files for `wasmstream test` and `wasmstream demo`: an in-process
// registry (franz-go's srfake, Confluent's REST API on a loopback port)
// serves them, and stands in for schema_registry.url, so that records are
// framed, decoded and encoded by the host's own registry client and
// codecs, offline, exactly as against a real registry.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/wasmstream/wasmstream/internal/conformance"
	"github.com/wasmstream/wasmstream/internal/schemareg/avrocodec"
	"github.com/wasmstream/wasmstream/internal/schemareg/jsoncodec"
	"github.com/wasmstream/wasmstream/internal/schemareg/protocodec"
	"github.com/wasmstream/wasmstream/internal/termsafe"
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

const schemaFlagUsage = "serve FILE (.avsc Avro, .proto Protobuf, .json JSON Schema) as SUBJECT's schema, SUBJECT=FILE (repeatable), from a registry in this process that stands in for schema_registry.url: no registry needed. The files FILE references are looked for beside it and served as its registry references: a .proto's imports (by import path), a JSON Schema's \"$ref\"s to other files (by relative name), an Avro type FILE uses and does not define (com.acme.Money: com.acme.Money.avsc, or else Money.avsc)"

// localRegistry serves schema files. Close stops it.
type localRegistry struct {
	reg *srfake.Registry
	cfg *config.SchemaRegistry // the codecs' options the files are checked with
	// byFile is the subject a file named by a vector is served as;
	// bySubject the file a --schema subject is served from.
	byFile, bySubject map[string]string
	served            map[string]bool // the subjects of the files vectors name, once served
}

// newLocalRegistry starts a registry serving the --schema files; the
// files are checked with the codecs of sc's options first, so a schema
// that does not compile is refused here, naming its file.
func newLocalRegistry(f *schemaFlag, sc *config.SchemaRegistry) (*localRegistry, error) {
	l := &localRegistry{reg: srfake.New(), cfg: sc, byFile: map[string]string{}, bySubject: map[string]string{}, served: map[string]bool{}}
	// Reads, and the two requests a pipeline's start makes of a
	// registry (output_format.*.schema_file: a schema's lookup under its
	// subject, POST /subjects/S; auto_register: its registration, POST
	// /subjects/S/versions). Nothing else: no other process on the
	// machine deletes a schema or changes a subject's compatibility or
	// mode under the host.
	l.reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet || r.Method == http.MethodHead ||
			(r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/subjects/")) {
			return false
		}
		http.Error(w, `{"error_code":405,"message":"the schema files of this wasmstream process: reads, lookups and registrations only"}`, http.StatusMethodNotAllowed)
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
	w := &schemaWalk{l: l}
	if _, _, err := w.register(subject, file, 0); err != nil {
		return fmt.Errorf("%s: %w", what, err)
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
	subject, err := l.subjectOf(path)
	if err != nil || l.served[subject] {
		return subject, err
	}
	if err := l.serve(subject, path, what); err != nil {
		return "", err
	}
	l.served[subject] = true
	return subject, nil
}

// subjectOf names the subject of a file served for itself (named by a
// vector, or imported): one per file.
func (l *localRegistry) subjectOf(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if s, ok := l.byFile[abs]; ok {
		return s, nil
	}
	s := fmt.Sprintf("file-%d-%s", len(l.byFile)+1, filepath.Base(path))
	l.byFile[abs] = s
	return s, nil
}

// The bounds of a schema file's imports, the registry client's own
// (schema_registry's references): how deep they chain, how many in all.
const (
	maxImportDepth = 8
	maxImports     = 64
)

// protoImport is a .proto file's import statement.
var protoImport = regexp.MustCompile(`(?m)^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;`)

// schemaWalk registers a schema file and the files it references, each
// under a subject of its own, as the references a registry keeps: the
// host's client fetches them as it would from any registry. A reference
// is looked for beside the file that makes it (schemarefs.go).
type schemaWalk struct {
	l       *localRegistry
	imports int
}

// refText is a reference's name and text, as the codecs take them.
type refText struct{ name, text string }

// register registers file under subject and returns it as registered
// (its version), and the texts of the files it references, transitively,
// each after the ones it references (Avro's order), once by name.
func (w *schemaWalk) register(subject, file string, depth int) (sr.SubjectSchema, []refText, error) {
	var none sr.SubjectSchema
	s, err := readSchemaFile(file)
	if err != nil {
		return none, nil, err
	}
	frefs, missing := fileRefs(file, s)
	var refs []refText
	for _, r := range frefs {
		w.imports++
		switch {
		case depth >= maxImportDepth:
			return none, nil, fmt.Errorf("%s %s %s: references chain deeper than %d", file, r.verb, r.name, maxImportDepth)
		case w.imports > maxImports:
			return none, nil, fmt.Errorf("%s %s %s: more than %d references in all", file, r.verb, r.name, maxImports)
		}
		sub, err := w.l.subjectOf(r.path)
		if err != nil {
			return none, nil, err
		}
		imported, subRefs, err := w.register(sub, r.path, depth+1)
		if err != nil {
			return none, nil, fmt.Errorf("%s %s %s (looked for beside it): %w", file, r.verb, r.name, err)
		}
		s.References = append(s.References, sr.SchemaReference{Name: r.name, Subject: sub, Version: imported.Version})
		if s.Type == sr.TypeJSON {
			// A JSON Schema's $refs are relative to the file that makes
			// them: r's own are named here relative to this file.
			for i := range subRefs {
				subRefs[i].name = jsoncodec.RefName(r.name, subRefs[i].name)
			}
		}
		refs = addRefs(refs, append(subRefs, refText{r.name, imported.Schema.Schema})...)
	}
	if err := compileSchema(file, s, refs, w.l.cfg); err != nil {
		return none, nil, fmt.Errorf("%w%s", err, missing)
	}
	_, version, err := w.l.reg.RegisterSchema(subject, s)
	if err != nil {
		return none, nil, err
	}
	return sr.SubjectSchema{Subject: subject, Version: version, Schema: s}, refs, nil
}

// addRefs appends the references of more that refs lacks (by name).
func addRefs(refs []refText, more ...refText) []refText {
	for _, m := range more {
		if !slices.ContainsFunc(refs, func(r refText) bool { return r.name == m.name }) {
			refs = append(refs, m)
		}
	}
	return refs
}

// readSchemaFile reads a schema file, of the type its extension says.
func readSchemaFile(file string) (sr.Schema, error) {
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
	return sr.Schema{Schema: string(b), Type: map[string]sr.SchemaType{"AVRO": sr.TypeAvro, "PROTOBUF": sr.TypeProtobuf, "JSON": sr.TypeJSON}[typ]}, nil
}

// compileSchema compiles s, the schema file's, as the host would (with
// sc's options; refs the texts of its references), so that a schema
// that does not compile is an error naming the file and the codec's
// reason.
func compileSchema(file string, s sr.Schema, refs []refText, sc *config.SchemaRegistry) error {
	texts, byName := make([]string, len(refs)), make(map[string]string, len(refs))
	for i, r := range refs {
		texts[i], byName[r.name] = r.text, r.text
	}
	var err error
	switch s.Type {
	case sr.TypeAvro:
		_, err = avrocodec.Compile(s.Schema, texts, avrocodec.Options{TaggedUnions: sc.Avro.TaggedUnions, RawLogicalTypes: sc.Avro.RawLogicalTypes}, avrocodec.Limits{})
	case sr.TypeProtobuf:
		_, err = protocodec.Compile(s.Schema, byName, protocodec.Options{JSONNames: sc.Protobuf.JSONNames}, protocodec.Limits{})
	default:
		_, err = jsoncodec.Compile(s.Schema, byName, jsoncodec.Limits{})
	}
	if err != nil {
		return fmt.Errorf("%s is not a schema wasmstream reads as %s: %v", file, map[sr.SchemaType]string{sr.TypeAvro: "Avro", sr.TypeProtobuf: "Protobuf", sr.TypeJSON: "JSON Schema"}[s.Type], err)
	}
	return nil
}

// lookUpOnly turns auto_register off in pc's output parts, for a run of
// test or demo against a registry that is not this process's (url): those
// commands try a processor, and a try never writes to a real registry;
// the host looks the schema file up under its subject instead. It says so
// once on w (cmd names the command) and returns sets with a --set for
// each key it turned off (pipelines.<name>.output_format.<part>.auto_register=false),
// for a host that loads the config again.
func lookUpOnly(w io.Writer, cmd, url string, pc *config.Pipeline, sets []string) []string {
	var keys []string
	for _, p := range []struct {
		part string
		out  *config.OutputPart
	}{{partKey, &pc.OutputFormat.Key}, {partValue, &pc.OutputFormat.Value}} {
		if !p.out.AutoRegister {
			continue
		}
		p.out.AutoRegister = false
		keys = append(keys, "output_format."+p.part+".auto_register")
		sets = append(sets, "pipelines."+pc.Name+".output_format."+p.part+".auto_register=false")
	}
	if len(keys) > 0 {
		fmt.Fprintf(w, "%s: pipeline %s: %s not followed: the schema registry at %s is not this process's, and %s only reads it (the subject must hold the schema file already); serve the file with --schema SUBJECT=FILE to have it registered in this process\n",
			cmd, termsafe.Line(pc.Name), strings.Join(keys, ", "), termsafe.Line(url), cmd)
	}
	return sets
}
