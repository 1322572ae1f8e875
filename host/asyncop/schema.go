package asyncop

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/internal/schemareg"
)

// SchemaRegistry is the section of the schema-registry operations
// (async.schema_registry; ABI.md §7.3): OpSchemaByID and OpSchemaBySubject
// read the process's registry (schema_registry:) through its one client
// and its cache by id; OpSchemaRegister writes to it. A module has none of
// them unless the config grants it: lookups need Enabled, a registration
// also a subject in RegisterSubjects.
type SchemaRegistry struct {
	// Enabled lets the pipeline's guests look schemas up by id and by
	// subject and version. It needs schema_registry.url.
	Enabled bool `koanf:"enabled"`
	// RegisterSubjects are the subjects a guest may register schemas
	// under: a name, or a prefix ending in "*". Empty: every registration
	// is refused. The registry's compatibility rules still decide whether
	// a schema may join its subject.
	RegisterSubjects []string `koanf:"register_subjects"`
	// MaxSchemaBytes bounds the text of a schema a guest reads or
	// registers; a longer one is refused.
	MaxSchemaBytes int `koanf:"max_schema_bytes"`
	// MaxReferences bounds the references of a schema a guest reads or
	// registers.
	MaxReferences int `koanf:"max_references"`
}

// Defaults of the schema-registry section.
const (
	DefaultSchemaMaxBytes      = 1 << 20
	DefaultSchemaMaxReferences = 64
	// maxSubjectBytes bounds a subject a guest names.
	maxSubjectBytes = 1024
)

// SetDefaults sets s's zero fields to their defaults.
func (s *SchemaRegistry) SetDefaults() {
	if s.MaxSchemaBytes <= 0 {
		s.MaxSchemaBytes = DefaultSchemaMaxBytes
	}
	if s.MaxReferences <= 0 {
		s.MaxReferences = DefaultSchemaMaxReferences
	}
}

// Check adds a problem for each value of s that cannot work. That Enabled
// needs schema_registry.url is checked where both are known
// (scheduler/config).
func (s *SchemaRegistry) Check(prefix string, add func(key, format string, args ...any)) {
	if len(s.RegisterSubjects) > 0 && !s.Enabled {
		add(prefix+".register_subjects", "is set but %s.enabled is false: set enabled: true to let guests use the registry", prefix)
	}
	for j, subj := range s.RegisterSubjects {
		if subj == "" || len(subj) > maxSubjectBytes || strings.Contains(strings.TrimSuffix(subj, "*"), "*") {
			add(fmt.Sprintf("%s.register_subjects[%d]", prefix, j), "%q: want a subject name, or a prefix ending in \"*\"", subj)
		}
	}
	if s.MaxSchemaBytes < 1 || s.MaxSchemaBytes > 64<<20 {
		add(prefix+".max_schema_bytes", "%d: want 1 to 64 MiB", s.MaxSchemaBytes)
	}
	if s.MaxReferences < 1 || s.MaxReferences > abi.MaxSchemaReferences {
		add(prefix+".max_references", "%d: want 1 to %d", s.MaxReferences, abi.MaxSchemaReferences)
	}
}

// Operations makes the three schema-registry operations of one module. They
// exist whether or not the section grants them: a guest asking for one it
// is not granted reads why in the refusal.
func (s *SchemaRegistry) Operations(key string, env Env) map[abi.OpKind]Operation {
	cfg := *s
	cfg.SetDefaults()
	base := schemaOp{cfg: cfg, key: key, client: env.Schemas, subjects: &subjectCache{m: map[subjectKey]*subjectAnswer{}}}
	if env.Schemas != nil {
		base.subjects.ttl = env.Schemas.RefreshPeriod()
	}
	return map[abi.OpKind]Operation{
		abi.OpSchemaByID:      schemaByIDOp{base},
		abi.OpSchemaBySubject: schemaBySubjectOp{base},
		abi.OpSchemaRegister:  schemaRegisterOp{base},
	}
}

// schemaOp is what the three operations share. The registry is asked on a
// goroutine of the pool (goroutines), never on the instance's: a registry
// that is down costs the record its request timeout
// (schema_registry.request_timeout) or its deadline, whichever comes
// first, and the instance nothing.
type schemaOp struct {
	cfg      SchemaRegistry
	key      string
	client   *schemareg.Client // nil: the process has no registry
	subjects *subjectCache     // the module's, shared by its three operations
}

// refusal is why the operation may not run at all, or "".
func (op schemaOp) refusal() string {
	switch {
	case !op.cfg.Enabled:
		return op.key + ".enabled is false: the pipeline's guests may not use the schema registry"
	case op.client == nil:
		return "the process has no schema registry (schema_registry.url)"
	}
	return ""
}

// run answers done with the result of ask, asked on a goroutine of the
// pool, unless the operation is refused first.
func (op schemaOp) run(desc string, done func([]byte), ask func() []byte) (string, error) {
	if why := op.refusal(); why != "" {
		done(abi.AppendCompletionError(nil, abi.CompletionRefused, "schema registry: "+why))
		return desc, nil
	}
	goroutines.Go(func() { done(ask()) })
	return desc, nil
}

// failed is the result of a registry error: code 1 when the same request
// may succeed later (the registry did not answer, refused the credentials,
// or the record's deadline came first), code 3 when it gives the same
// answer every time (no such schema, one wasmstream cannot read, a
// registration the registry refuses).
func failed(ctx context.Context, err error) []byte {
	code := abi.CompletionRefused
	if schemareg.Retryable(err) || ctx.Err() != nil || !errors.As(err, new(*schemareg.Error)) {
		code = abi.CompletionError
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "schema registry") { // the client's messages say it already
		msg = "schema registry: " + msg
	}
	return abi.AppendCompletionError(nil, code, msg)
}

// refused is a result of code 3 with msg.
func refused(msg string) []byte {
	return abi.AppendCompletionError(nil, abi.CompletionRefused, "schema registry: "+msg)
}

// definition is s as the guest reads it, or a refusal past the section's
// bounds.
func (op schemaOp) definition(s *schemareg.Schema) (abi.SchemaDef, []byte) {
	if len(s.Text) > op.cfg.MaxSchemaBytes {
		return abi.SchemaDef{}, refused(fmt.Sprintf("schema id %d is %d bytes, more than %s.max_schema_bytes (%d)", s.ID, len(s.Text), op.key, op.cfg.MaxSchemaBytes))
	}
	if len(s.Declared) > op.cfg.MaxReferences {
		return abi.SchemaDef{}, refused(fmt.Sprintf("schema id %d has %d references, more than %s.max_references (%d)", s.ID, len(s.Declared), op.key, op.cfg.MaxReferences))
	}
	def := abi.SchemaDef{Type: abiType(s.Type), Schema: s.Text, References: make([]abi.SchemaReference, len(s.Declared))}
	for i, r := range s.Declared {
		def.References[i] = abi.SchemaReference{Name: r.Name, Subject: r.Subject, Version: r.Version}
	}
	return def, nil
}

func abiType(t sr.SchemaType) abi.SchemaType {
	switch t {
	case sr.TypeProtobuf:
		return abi.SchemaProtobuf
	case sr.TypeJSON:
		return abi.SchemaJSON
	}
	return abi.SchemaAvro
}

// schemaByIDOp is OpSchemaByID.
type schemaByIDOp struct{ schemaOp }

func (op schemaByIDOp) Start(ctx context.Context, req []byte, done func([]byte)) (string, error) {
	id, err := abi.DecodeSchemaByID(req)
	if err != nil {
		return "", err
	}
	return op.run("schema id "+strconv.Itoa(id), done, func() []byte {
		if id <= 0 {
			return refused(fmt.Sprintf("schema id %d: ids are positive", id))
		}
		s, err := op.client.SchemaByID(ctx, id)
		if err != nil {
			return failed(ctx, err)
		}
		def, bad := op.definition(s)
		if bad != nil {
			return bad
		}
		return abi.AppendSchemaDef([]byte{abi.CompletionOK}, &def)
	})
}

// schemaBySubjectOp is OpSchemaBySubject.
type schemaBySubjectOp struct{ schemaOp }

func (op schemaBySubjectOp) Start(ctx context.Context, req []byte, done func([]byte)) (string, error) {
	subject, version, err := abi.DecodeSchemaBySubject(req)
	if err != nil {
		return "", err
	}
	vname := strconv.Itoa(version)
	if version == -1 {
		vname = "latest"
	}
	desc := "schema " + trimDesc(subject) + " version " + vname
	return op.run(desc, done, func() []byte {
		switch {
		case subject == "" || len(subject) > maxSubjectBytes:
			return refused(fmt.Sprintf("subject of %d bytes: want 1 to %d", len(subject), maxSubjectBytes))
		case version == 0 || version < -1:
			return refused(fmt.Sprintf("version %d: want -1 (the latest) or a version from 1", version))
		}
		s, v, err := op.bySubject(ctx, subject, version)
		if err != nil {
			return failed(ctx, err)
		}
		def, bad := op.definition(s)
		if bad != nil {
			return bad
		}
		ss := abi.SubjectSchema{ID: s.ID, Version: v, SchemaDef: def}
		return abi.AppendSubjectSchema([]byte{abi.CompletionOK}, &ss)
	})
}

// bySubject is the schema subject holds at version, and the version it
// is: the registry asked only when the module's subject cache has no
// answer (then the schema comes with it), the schema otherwise from the
// client's cache by id.
func (op schemaBySubjectOp) bySubject(ctx context.Context, subject string, version int) (*schemareg.Schema, int, error) {
	var fetched *schemareg.Schema
	id, v, err := op.subjects.get(ctx, subjectKey{subject, version}, func() (int, int, error) {
		s, v, err := op.client.SchemaByVersion(ctx, subject, version)
		if err != nil {
			return 0, 0, err
		}
		fetched = s
		return s.ID, v, nil
	})
	switch {
	case err != nil:
		return nil, 0, err
	case fetched != nil:
		return fetched, v, nil
	}
	s, err := op.client.SchemaByID(ctx, id)
	return s, v, err
}

// subjectCache remembers which schema a subject holds at a version, so
// that lookups by subject do not each ask the registry: a fixed version's
// answer for the module's life (a version's schema does not change), the
// latest's for ttl (schema_registry.refresh_period, as for outputs of
// version latest). It holds at most maxSubjectAnswers answers, and starts
// over when full; errors are not kept. Lookups of one key at once share
// one request. Safe for concurrent use.
type subjectCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[subjectKey]*subjectAnswer
}

// maxSubjectAnswers bounds a subject cache.
const maxSubjectAnswers = 1024

type subjectKey struct {
	subject string
	version int
}

// subjectAnswer is an answer, or one being fetched until done is closed.
type subjectAnswer struct {
	done        chan struct{}
	id, version int
	at          time.Time
	err         error
}

// get returns key's answer: the one kept, or fetch's, fetched once for
// every lookup that misses meanwhile. A lookup that waits on another's
// fetch ends with its ctx.
func (c *subjectCache) get(ctx context.Context, key subjectKey, fetch func() (id, version int, err error)) (int, int, error) {
	c.mu.Lock()
	if a, ok := c.m[key]; ok && (a.at.IsZero() || key.version != -1 || time.Since(a.at) < c.ttl) {
		c.mu.Unlock()
		select {
		case <-a.done:
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
		return a.id, a.version, a.err
	}
	if len(c.m) >= maxSubjectAnswers {
		clear(c.m)
	}
	a := &subjectAnswer{done: make(chan struct{})}
	c.m[key] = a
	c.mu.Unlock()

	id, version, err := fetch()

	c.mu.Lock()
	a.id, a.version, a.err, a.at = id, version, err, time.Now()
	if err != nil && c.m[key] == a {
		delete(c.m, key)
	}
	c.mu.Unlock()
	close(a.done)
	return id, version, err
}

// forget drops key's answer.
func (c *subjectCache) forget(key subjectKey) {
	c.mu.Lock()
	delete(c.m, key)
	c.mu.Unlock()
}

// schemaRegisterOp is OpSchemaRegister.
type schemaRegisterOp struct{ schemaOp }

func (op schemaRegisterOp) Start(ctx context.Context, req []byte, done func([]byte)) (string, error) {
	subject, def, err := abi.DecodeSchemaRegister(req)
	if err != nil {
		return "", err
	}
	desc := "register a schema under " + trimDesc(subject)
	if op.refusal() == "" { // else run refuses, saying why
		if why := op.registerRefusal(subject, &def); why != "" {
			done(refused(why))
			return desc, nil
		}
	}
	// The request aliases the guest's memory: what the registry is sent
	// is a copy (strings decoded are copies).
	s := sr.Schema{Schema: def.Schema, Type: sr.SchemaType(def.Type), References: make([]sr.SchemaReference, len(def.References))}
	for i, r := range def.References {
		s.References[i] = sr.SchemaReference{Name: r.Name, Subject: r.Subject, Version: r.Version}
	}
	return op.run(desc, done, func() []byte {
		id, version, err := op.client.Register(ctx, subject, s)
		if err != nil {
			return failed(ctx, err)
		}
		op.subjects.forget(subjectKey{subject, -1}) // its latest may be this one now
		return abi.AppendSchemaRegistered([]byte{abi.CompletionOK}, id, version)
	})
}

// registerRefusal is why def may not be registered under subject, or "".
func (op schemaRegisterOp) registerRefusal(subject string, def *abi.SchemaDef) string {
	switch {
	case !op.subjectAllowed(subject):
		if len(op.cfg.RegisterSubjects) == 0 {
			return fmt.Sprintf("registering under %s refused: no subject is allowed (%s.register_subjects is empty)", trimDesc(subject), op.key)
		}
		return fmt.Sprintf("registering under %s refused (%s.register_subjects: %s)", trimDesc(subject), op.key, strings.Join(op.cfg.RegisterSubjects, ", "))
	case def.Type < abi.SchemaAvro || def.Type > abi.SchemaJSON:
		return fmt.Sprintf("schema type %d: want 0 (AVRO), 1 (PROTOBUF) or 2 (JSON)", def.Type)
	case def.Schema == "":
		return "an empty schema"
	case len(def.Schema) > op.cfg.MaxSchemaBytes:
		return fmt.Sprintf("a schema of %d bytes, more than %s.max_schema_bytes (%d)", len(def.Schema), op.key, op.cfg.MaxSchemaBytes)
	case len(def.References) > op.cfg.MaxReferences:
		return fmt.Sprintf("%d references, more than %s.max_references (%d)", len(def.References), op.key, op.cfg.MaxReferences)
	}
	return ""
}

// subjectAllowed reports whether register_subjects names subject, or a
// prefix of it.
func (op schemaRegisterOp) subjectAllowed(subject string) bool {
	if subject == "" || len(subject) > maxSubjectBytes {
		return false
	}
	for _, a := range op.cfg.RegisterSubjects {
		if p, ok := strings.CutSuffix(a, "*"); ok && strings.HasPrefix(subject, p) || a == subject {
			return true
		}
	}
	return false
}

// trimDesc is s cut for a description or a message.
func trimDesc(s string) string {
	if len(s) > 200 {
		return strconv.Quote(s[:200]) + "…"
	}
	return strconv.Quote(s)
}
