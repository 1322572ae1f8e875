// Package asyncop holds the asynchronous operations that have settings
// (ABI.md, section 7): for each kind, in one file, the operation, its
// section of a pipeline's async configuration, that section's defaults and
// its checks. Config is the async section whole, and its fields are the
// table of kinds: a kind with settings is one file here and one row
// (field) in Config, and neither scheduler/config nor host changes.
//
// It links no WebAssembly runtime, so the configuration (scheduler/config)
// takes its types, defaults and checks from here; package host takes a
// pipeline's Config whole and makes its operations (Config.Operations).
// The operations without settings (the timer, the state reads) are
// package host's own.
package asyncop

import (
	"context"
	"reflect"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/internal/schemareg"
)

// An Operation performs one kind of asynchronous operation for guests. The
// registry of a module maps abi.OpKind to its Operation; a new kind is a new
// OpKind constant and a new Operation, and nothing else in the ABI changes.
type Operation interface {
	// Start decodes req and starts the operation. A malformed request is an
	// error (the guest's async_start gets ErrnoBadEncoding; an error that is
	// an abi.Errno, that errno) and done is not called. Otherwise Start
	// returns a short description for reports ("GET http://lookup/users/7")
	// and done is called exactly once, from any goroutine, with the result
	// (abi.AppendCompletionOK or abi.AppendCompletionError), also when ctx
	// ends first. A refusal by policy is a result, so the guest reads why.
	// Start must not block on I/O: the instance's goroutine calls it.
	Start(ctx context.Context, req []byte, done func(result []byte)) (desc string, err error)
}

// An IdleCloser is an Operation that keeps connections between requests:
// its module closes them when it closes (Module.Close).
type IdleCloser interface {
	CloseIdleConnections()
}

// Config is a pipeline's async section: the bounds of its operations, and
// one section per operation kind that has settings. Each section is a
// field whose type implements Section (by pointer) and whose koanf tag is
// its key under async; adding a kind with settings adds one such field.
// Its zero fields take their defaults (SetDefaults).
type Config struct {
	// MaxInFlight bounds the operations in flight per instance: while an
	// instance has that many outstanding, it takes no new record. With
	// max_in_flight: auto (AutoInFlight) it is the bound the host's limit
	// moves under (scheduler/config.AutoAsyncMaxInFlight).
	MaxInFlight int `koanf:"max_in_flight"`
	// AutoInFlight is max_in_flight: auto: the host sets the operations in
	// flight per instance from the latency it measures.
	AutoInFlight bool `koanf:"-"`
	// MaxPerRecord bounds the operations one record may have outstanding;
	// async_start returns ErrnoLimit past it.
	MaxPerRecord int `koanf:"max_per_record"`

	// The kinds' sections: the table.
	HTTP           HTTP           `koanf:"http"`
	SchemaRegistry SchemaRegistry `koanf:"schema_registry"`
}

// Defaults of Config's own keys.
const (
	DefaultMaxInFlight  = 64
	DefaultMaxPerRecord = 16
)

// A Section is the settings of one or more operation kinds: a part of
// Config, with its defaults, its checks and the operations it makes.
type Section interface {
	// SetDefaults sets each zero field to its default.
	SetDefaults()
	// Check adds a problem for each value that cannot work, naming its key
	// under prefix, the section's key ("pipelines[2].async.http").
	Check(prefix string, add func(key, format string, args ...any))
	// Operations makes the section's operations, by kind, for one module:
	// key names the section in the refusals they answer with
	// ("pipelines.lookup.async.http"), env is what the process shares.
	Operations(key string, env Env) map[abi.OpKind]Operation
}

// Env is what the operations of every pipeline share: the process's
// clients, nil when it has none.
type Env struct {
	// Schemas is the process's schema-registry client (schema_registry:).
	Schemas *schemareg.Client
}

// Defaults returns Config with every default (a new value each call).
func Defaults() Config {
	var c Config
	c.SetDefaults()
	return c
}

// SetDefaults sets each zero field of c, its sections' included, to its
// default.
func (c *Config) SetDefaults() {
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxPerRecord <= 0 {
		c.MaxPerRecord = DefaultMaxPerRecord
	}
	c.sections(func(_ string, s Section) { s.SetDefaults() })
}

// Check adds a problem for each value of c that cannot work, naming its key
// under prefix ("pipelines[2].async").
func (c *Config) Check(prefix string, add func(key, format string, args ...any)) {
	if c.MaxInFlight < 1 || c.MaxInFlight > 100000 {
		add(prefix+".max_in_flight", "%d: want 1 to 100000 operations per instance", c.MaxInFlight)
	}
	if c.MaxPerRecord < 1 || c.MaxPerRecord > 1024 {
		add(prefix+".max_per_record", "%d: want 1 to 1024", c.MaxPerRecord)
	}
	c.sections(func(name string, s Section) { s.Check(prefix+"."+name, add) })
}

// Operations makes the operations of every section of c for one module;
// key names c in refusals ("pipelines.lookup.async").
func (c *Config) Operations(key string, env Env) map[abi.OpKind]Operation {
	ops := map[abi.OpKind]Operation{}
	c.sections(func(name string, s Section) {
		for k, op := range s.Operations(key+"."+name, env) {
			ops[k] = op
		}
	})
	return ops
}

// sections calls f with each section of c and its key under async, in the
// order of Config's fields.
func (c *Config) sections(f func(name string, s Section)) {
	v := reflect.ValueOf(c).Elem()
	for i := 0; i < v.NumField(); i++ {
		if s, ok := v.Field(i).Addr().Interface().(Section); ok {
			f(v.Type().Field(i).Tag.Get("koanf"), s)
		}
	}
}
