package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// SchemaRegistry is the process's schema registry (schema_registry:): the
// one every pipeline with a confluent input or output format reads its
// schemas from (internal/schemareg; RATIONALE.md, "Schema-registry data").
// Secrets follow kafka.sasl's rule: the password comes from
// basic_auth.password_file or the environment variable
// WASMSTREAM_SCHEMA_REGISTRY_PASSWORD, never the config file or --set.
type SchemaRegistry struct {
	// URL is the registry's Confluent-compatible API (for Apicurio,
	// .../apis/ccompat/v7). Empty: no registry (every format raw).
	URL       string             `koanf:"url"`
	BasicAuth SchemaRegistryAuth `koanf:"basic_auth"`
	// TokenFile holds a bearer token, read again at every request.
	TokenFile string            `koanf:"token_file"`
	TLS       SchemaRegistryTLS `koanf:"tls"`
	// RequestTimeout bounds each request to the registry, connecting
	// included.
	RequestTimeout time.Duration       `koanf:"request_timeout"`
	Cache          SchemaRegistryCache `koanf:"cache"`
	// MaxSchemaBytes bounds one schema's text.
	MaxSchemaBytes int `koanf:"max_schema_bytes"`
	// RefreshPeriod is how often an output of version latest asks the
	// registry for the subject's latest version.
	RefreshPeriod time.Duration       `koanf:"refresh_period"`
	Avro          SchemaRegistryAvro  `koanf:"avro"`
	Protobuf      SchemaRegistryProto `koanf:"protobuf"`
}

// SchemaRegistryAuth is HTTP basic auth to the registry (for Confluent
// Cloud: the API key and secret).
type SchemaRegistryAuth struct {
	Username string `koanf:"username"`
	// Password is taken from the environment only
	// (WASMSTREAM_SCHEMA_REGISTRY_PASSWORD, schemaPasswordEnv).
	Password     string `koanf:"password" json:"-" secret:"schema_registry.basic_auth.password_file"`
	PasswordFile string `koanf:"password_file"`
}

// String leaves the password out.
func (a SchemaRegistryAuth) String() string {
	pw := ""
	if a.Password != "" {
		pw = " password=<redacted>"
	}
	return fmt.Sprintf("{username=%s%s password_file=%s}", a.Username, pw, a.PasswordFile)
}

// schemaPasswordEnv is the environment variable schema_registry's basic
// auth password is taken from (the name the password has in the
// schema_registry section, besides its key's own
// WASMSTREAM_SCHEMA_REGISTRY_BASIC_AUTH_PASSWORD).
const schemaPasswordEnv = EnvPrefix + "SCHEMA_REGISTRY_PASSWORD"

// SchemaRegistryTLS is the registry connection's TLS, with kafka.tls's
// rules; an https URL turns it on (system roots unless ca_file).
type SchemaRegistryTLS struct {
	CAFile             string `koanf:"ca_file"`
	CertFile           string `koanf:"cert_file"`
	KeyFile            string `koanf:"key_file"`
	ServerName         string `koanf:"server_name"`
	InsecureSkipVerify bool   `koanf:"insecure_skip_verify"`
}

// SchemaRegistryCache bounds the schemas kept compiled, by id.
type SchemaRegistryCache struct {
	MaxSchemas int `koanf:"max_schemas"`
	MaxBytes   int `koanf:"max_bytes"`
}

// SchemaRegistryAvro chooses the Avro JSON contract (docs/SCHEMA-REGISTRY.md).
type SchemaRegistryAvro struct {
	TaggedUnions    bool `koanf:"tagged_unions"`
	RawLogicalTypes bool `koanf:"raw_logical_types"`
}

// SchemaRegistryProto chooses the Protobuf JSON contract.
type SchemaRegistryProto struct {
	JSONNames bool `koanf:"json_names"`
}

// Record formats (input_format.*.format, output_format.*.format).
const (
	FormatRaw       = "raw"       // the bytes as they are
	FormatConfluent = "confluent" // the Confluent wire format: decoded to / encoded from JSON with a registry's schema
)

// Subject strategies (output_format.*.subject_strategy): the names
// Confluent's serializers give the subject of a topic's schema.
const (
	StrategyTopic       = "topic"        // <topic>-value, <topic>-key
	StrategyRecord      = "record"       // <record>
	StrategyTopicRecord = "topic_record" // <topic>-<record>
)

// InputFormat is how a pipeline's input records are read (input_format:).
// It is a key of its own beside inputs:, which stays a list of topics.
type InputFormat struct {
	Value InputPart `koanf:"value"`
	Key   InputPart `koanf:"key"`
	// MaxJSONBytes bounds the JSON one decoded key or value may become:
	// past it the record fails (schema.decode). The decoded JSON lives in
	// the worker's memory while the guest call that reads it runs.
	MaxJSONBytes int `koanf:"max_json_bytes"`
}

// InputPart is the format of a record's key or value.
type InputPart struct {
	Format string `koanf:"format"`
}

// Confluent reports whether the part is decoded.
func (p InputPart) Confluent() bool { return p.Format == FormatConfluent }

// OutputFormat is how a pipeline's outputs to its output topic are
// written (output_format:). It is a key of its own beside output:, which
// stays the topic's name: configs from before it are unchanged.
type OutputFormat struct {
	Value OutputPart `koanf:"value"`
	Key   OutputPart `koanf:"key"`
}

// OutputPart is the format of an output's key or value.
type OutputPart struct {
	Format string `koanf:"format"`
	// Subject is the registry subject written with; "" names it by
	// SubjectStrategy.
	Subject         string `koanf:"subject"`
	SubjectStrategy string `koanf:"subject_strategy"`
	// Record is the fully-qualified record (Avro) or message (Protobuf)
	// name the record and topic_record strategies name the subject by.
	Record string `koanf:"record"`
	// Version is "latest" (re-resolved every refresh_period) or a
	// version number.
	Version string `koanf:"version"`
	// Message is the Protobuf message written (full name, or relative to
	// the schema's package); "" is the schema's first message.
	Message string `koanf:"message"`
	// SchemaFile is the schema the outputs are written with, read at
	// start (relative to the config's directory): .avsc Avro, .proto
	// Protobuf, .json JSON Schema. The host writes with the id the
	// subject holds it under; Version is then not used.
	SchemaFile string `koanf:"schema_file"`
	// AutoRegister registers SchemaFile under the subject at start (the
	// registry's compatibility rules decide whether it may). False, the
	// default: the host never registers, and a schema file the subject
	// does not hold fails the start.
	AutoRegister bool `koanf:"auto_register"`
}

// Schema-file types by extension (output_format.*.schema_file): the
// registry's names for them.
var schemaFileTypes = map[string]string{".avsc": "AVRO", ".proto": "PROTOBUF", ".json": "JSON"}

// SchemaFileType is the registry's name of the schema type of SchemaFile
// (AVRO, PROTOBUF or JSON), by its extension; "" for another extension.
func (p OutputPart) SchemaFileType() string {
	return schemaFileTypes[strings.ToLower(filepath.Ext(p.SchemaFile))]
}

// SchemaFilePath is p's schema_file resolved against the config's
// directory.
func (c *Config) SchemaFilePath(p OutputPart) string {
	if p.SchemaFile == "" || filepath.IsAbs(p.SchemaFile) || c.Dir == "" {
		return p.SchemaFile
	}
	return filepath.Join(c.Dir, p.SchemaFile)
}

// Confluent reports whether the part is encoded.
func (p OutputPart) Confluent() bool { return p.Format == FormatConfluent }

// VersionNumber is Version as the registry numbers it: -1 for latest.
func (p OutputPart) VersionNumber() int {
	if p.Version == "latest" {
		return -1
	}
	n, _ := strconv.Atoi(p.Version)
	return n
}

// SubjectFor is the subject the part writes with on topic (the pipeline's
// output topic); part is "value" or "key".
func (p OutputPart) SubjectFor(topic, part string) string {
	switch {
	case p.Subject != "":
		return p.Subject
	case p.SubjectStrategy == StrategyRecord:
		return p.Record
	case p.SubjectStrategy == StrategyTopicRecord:
		return topic + "-" + p.Record
	}
	return topic + "-" + part
}

// UsesSchemaRegistry reports whether p decodes or encodes anything with
// the registry.
func (p *Pipeline) UsesSchemaRegistry() bool {
	return p.InputFormat.Value.Confluent() || p.InputFormat.Key.Confluent() ||
		p.OutputFormat.Value.Confluent() || p.OutputFormat.Key.Confluent()
}

// checkSchemaRegistry checks schema_registry as far as the config alone
// tells; the files it names are read (and their permissions checked) by
// internal/schemareg when the host starts.
func (c *Config) checkSchemaRegistry(add addFunc) {
	s := &c.SchemaRegistry
	if s.URL == "" {
		for _, kv := range [][2]string{{"basic_auth.username", s.BasicAuth.Username}, {"basic_auth.password", s.BasicAuth.Password},
			{"basic_auth.password_file", s.BasicAuth.PasswordFile}, {"token_file", s.TokenFile}, {"tls.ca_file", s.TLS.CAFile},
			{"tls.cert_file", s.TLS.CertFile}, {"tls.key_file", s.TLS.KeyFile}} {
			if kv[1] != "" {
				add("schema_registry."+kv[0], "is set but schema_registry.url is not")
			}
		}
		return
	}
	u, err := url.Parse(s.URL)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		add("schema_registry.url", "%q: want an http:// or https:// URL of the registry's API", s.URL)
	case u.User != nil:
		add("schema_registry.url", "carries credentials: set schema_registry.basic_auth instead (the URL appears in errors and logs)")
	}
	c.checkSchemaRegistryAuth(add)
	if (s.TLS.CertFile == "") != (s.TLS.KeyFile == "") {
		add("schema_registry.tls.cert_file", "cert_file and key_file go together (a client certificate and its key)")
	}
	if s.RequestTimeout < 100*time.Millisecond || s.RequestTimeout > 5*time.Minute {
		add("schema_registry.request_timeout", "%s: want 100ms to 5m", s.RequestTimeout)
	}
	if s.RefreshPeriod < time.Second {
		add("schema_registry.refresh_period", "%s is below the minimum of 1s", s.RefreshPeriod)
	}
	if s.Cache.MaxSchemas < 1 {
		add("schema_registry.cache.max_schemas", "%d: want at least 1", s.Cache.MaxSchemas)
	}
	if s.Cache.MaxBytes < 1<<10 {
		add("schema_registry.cache.max_bytes", "%d: want at least 1024", s.Cache.MaxBytes)
	}
	if s.MaxSchemaBytes < 1<<10 || s.MaxSchemaBytes > 64<<20 {
		add("schema_registry.max_schema_bytes", "%d: want 1 KiB to 64 MiB", s.MaxSchemaBytes)
	}
}

// checkSchemaRegistryAuth checks schema_registry's credentials.
func (c *Config) checkSchemaRegistryAuth(add addFunc) {
	s := &c.SchemaRegistry
	a := &s.BasicAuth
	switch {
	case a.Password != "" && a.PasswordFile != "":
		add("schema_registry.basic_auth.password", "both password and password_file are set: keep one")
	case (a.Password != "" || a.PasswordFile != "") && a.Username == "":
		add("schema_registry.basic_auth.username", "a password is set without a username (for Confluent Cloud: the API key)")
	case a.Username != "" && a.Password == "" && a.PasswordFile == "":
		add("schema_registry.basic_auth.password_file", "basic auth needs a password: set schema_registry.basic_auth.password_file, or the environment variable %s", schemaPasswordEnv)
	}
	if s.TokenFile != "" && a.Username != "" {
		add("schema_registry.token_file", "a bearer token and basic auth are both set: keep one")
	}
}

// checkFormats checks a pipeline's input_format and output_format.
func (c *Config) checkFormats(add addFunc, key keyFunc, p *Pipeline) {
	noURL := c.SchemaRegistry.URL == ""
	for _, in := range []struct {
		name string
		part InputPart
	}{{"input_format.value", p.InputFormat.Value}, {"input_format.key", p.InputFormat.Key}} {
		switch in.part.Format {
		case FormatRaw:
		case FormatConfluent:
			if noURL {
				add(key(in.name+".format"), "confluent needs a schema registry: set schema_registry.url")
			}
		default:
			add(key(in.name+".format"), "%q: want raw or confluent", in.part.Format)
		}
	}
	if m := p.InputFormat.MaxJSONBytes; m < 1<<10 || m > 64<<20 {
		add(key("input_format.max_json_bytes"), "%d: want 1 KiB to 64 MiB", m)
	}
	for _, out := range []struct {
		name string
		o    OutputPart
	}{{"output_format.value", p.OutputFormat.Value}, {"output_format.key", p.OutputFormat.Key}} {
		c.checkOutputPart(add, func(sub string) string { return key(out.name + "." + sub) }, out.o, p.Output)
	}
}

// checkOutputPart checks one output part (output_format.value or .key) of
// a pipeline whose output topic is output; k names its keys.
func (c *Config) checkOutputPart(add addFunc, k func(string) string, o OutputPart, output string) {
	switch o.Format {
	case FormatRaw:
		for _, kv := range [][2]string{{"subject", o.Subject}, {"record", o.Record}, {"message", o.Message}, {"schema_file", o.SchemaFile}} {
			if kv[1] != "" {
				add(k(kv[0]), "is set but format is raw: set format: confluent to encode the outputs")
			}
		}
		if o.AutoRegister {
			add(k("auto_register"), "is set but format is raw: set format: confluent to encode the outputs")
		}
		return
	case FormatConfluent:
		if c.SchemaRegistry.URL == "" {
			add(k("format"), "confluent needs a schema registry: set schema_registry.url")
		}
	default:
		add(k("format"), "%q: want raw or confluent", o.Format)
		return
	}
	switch o.SubjectStrategy {
	case StrategyTopic:
		if o.Subject == "" && output == "" {
			add(k("subject"), "the topic strategy names the subject after the output topic, and the pipeline has none: set output or subject")
		}
	case StrategyRecord, StrategyTopicRecord:
		if o.Subject == "" && o.Record == "" {
			add(k("record"), "subject_strategy %s names the subject after the record: set record (its fully-qualified name), or subject", o.SubjectStrategy)
		}
	default:
		add(k("subject_strategy"), "%q: want topic, record or topic_record", o.SubjectStrategy)
	}
	if o.Version != "latest" {
		if n, err := strconv.Atoi(o.Version); err != nil || n < 1 {
			add(k("version"), "%q: want latest or a version number (1 or more)", o.Version)
		} else if o.SchemaFile != "" {
			add(k("version"), "%s and schema_file both name the schema written: keep one (with schema_file, the version the subject holds it as is written)", o.Version)
		}
	}
	c.checkSchemaFile(add, k, o)
	if o.Subject != "" && strings.TrimSpace(o.Subject) != o.Subject {
		add(k("subject"), "%q has leading or trailing spaces", o.Subject)
	}
}

// checkSchemaFile checks an output part's schema_file and auto_register;
// the file itself is read when the host starts.
func (c *Config) checkSchemaFile(add addFunc, k func(string) string, o OutputPart) {
	switch {
	case o.SchemaFile == "" && o.AutoRegister:
		add(k("schema_file"), "auto_register registers the schema in schema_file, and none is set: set schema_file (a .avsc, .proto or .json file), or leave auto_register out to write with the subject's registered version")
	case o.SchemaFile != "" && o.SchemaFileType() == "":
		add(k("schema_file"), "%q: want a .avsc (Avro), .proto (Protobuf) or .json (JSON Schema) file", o.SchemaFile)
	}
}
