package asyncop

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
)

// Every section of Config is a Section: a field of another struct type
// would be skipped by SetDefaults, Check and Operations, and its kind
// would silently not exist.
func TestEveryConfigSectionIsASection(t *testing.T) {
	typ := reflect.TypeOf(Config{})
	sections := 0
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if f.Type.Kind() != reflect.Struct {
			continue
		}
		if !reflect.PointerTo(f.Type).Implements(reflect.TypeOf((*Section)(nil)).Elem()) {
			t.Errorf("Config.%s (%s) is not a Section: give *%s SetDefaults, Check and Operations", f.Name, f.Type, f.Type.Name())
		}
		if tag := f.Tag.Get("koanf"); tag == "" || tag == "-" {
			t.Errorf("Config.%s has no key (koanf tag)", f.Name)
		}
		sections++
	}
	if sections == 0 {
		t.Fatal("Config has no sections")
	}
}

// The defaults pass the checks, and each kind with settings has its
// operation.
func TestDefaultsCheckedAndOperations(t *testing.T) {
	c := Defaults()
	c.Check("async", func(key, format string, args ...any) {
		t.Errorf("defaults: %s: %s", key, strings.TrimSpace(format))
	})
	ops := c.Operations("pipelines.p.async", Env{})
	if _, ok := ops[abi.OpHTTP]; !ok {
		t.Errorf("operations %v: no %s", ops, abi.OpHTTP)
	}
	if c.HTTP.Timeout != DefaultHTTPTimeout || c.MaxPerRecord != DefaultMaxPerRecord {
		t.Errorf("defaults %+v", c)
	}
}

// SetDefaults fills zero fields only; Check names each bad key under the
// prefix it is given.
func TestSetDefaultsAndCheckKeys(t *testing.T) {
	c := Config{MaxPerRecord: 2000, HTTP: HTTP{Timeout: time.Microsecond, AllowHosts: []string{"http://x"}}}
	c.SetDefaults()
	if c.MaxPerRecord != 2000 || c.HTTP.Timeout != time.Microsecond || c.HTTP.ConnectTimeout != DefaultHTTPConnectTimeout {
		t.Fatalf("SetDefaults: %+v", c)
	}
	var keys []string
	c.Check("pipelines[1].async", func(key, _ string, _ ...any) { keys = append(keys, key) })
	want := []string{"pipelines[1].async.max_per_record", "pipelines[1].async.http.allow_hosts[0]", "pipelines[1].async.http.timeout"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("problems name %v, want %v", keys, want)
	}
}
