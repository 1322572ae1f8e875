package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
)

// A stated key of config.yaml: "key: value", commented out or not.
type statedKey struct {
	line      int
	path      string // "kafka.client_id", "pipelines[].limits.memory_pages"
	first     bool   // outside pipelines, or in the first pipeline
	commented bool
	value     string // the YAML value, "" for a section
	comment   string // the comment after it
}

var (
	// "  # client_id: wasmstream   # comment": the key's column is where it
	// would stand uncommented ("# " taking no room).
	commentedKeyRE = regexp.MustCompile(`^( *)#( +)([a-z_]+):(?: +([^ #][^#]*?))? *( #.*)?$`)
	setKeyRE       = regexp.MustCompile(`^( *)(- +)?([a-z_]+):(?: +([^ #][^#]*?))? *( #.*)?$`)
	// In a key's comment, "(default X)" or "X (default)" states its default
	// where the file sets another value.
	defaultMarkRE  = regexp.MustCompile(`\(default ([^)]+)\)`)
	defaultMarkRE2 = regexp.MustCompile(`(\S+) \(default\)`)
)

// exampleKeys are commented out in config.yaml with an example value: they
// have no default.
var exampleKeys = map[string]bool{"tracing.endpoint": true, "metrics.otlp.endpoint": true,
	"pipelines[].module_label": true, "pipelines[].canary.module": true, "pipelines[].canary.percent": true, "pipelines[].canary.label": true}

// readReference reads the keys config.yaml states, commented out or set.
func readReference(t *testing.T) []statedKey {
	root, _ := filepath.Abs("../..")
	b, err := os.ReadFile(filepath.Join(root, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type section struct {
		col  int
		name string
	}
	var stack []section
	var out []statedKey
	pipeline := -1
	for i, line := range strings.Split(string(b), "\n") {
		var col int
		var k statedKey
		if m := commentedKeyRE.FindStringSubmatch(line); m != nil {
			col = len(m[1]) + len(m[2]) - 1
			k = statedKey{commented: true, path: m[3], value: m[4], comment: m[5]}
		} else if m := setKeyRE.FindStringSubmatch(line); m != nil {
			col = len(m[1]) + len(m[2])
			if m[2] != "" && len(stack) > 0 && stack[0].name == "pipelines" {
				pipeline++
				stack = stack[:1]
			}
			k = statedKey{path: m[3], value: m[4], comment: m[5]}
		} else {
			continue
		}
		for len(stack) > 0 && stack[len(stack)-1].col >= col {
			stack = stack[:len(stack)-1]
		}
		var parts []string
		for _, s := range stack {
			parts = append(parts, s.name)
		}
		if len(parts) > 0 && parts[0] == "pipelines" {
			parts[0] = "pipelines[]"
		}
		name := k.path
		k.path = strings.Join(append(parts, name), ".")
		k.line = i + 1
		k.first = len(parts) == 0 || parts[0] != "pipelines[]" || pipeline == 0
		if k.value == "" {
			stack = append(stack, section{col, name})
			continue
		}
		out = append(out, k)
	}
	return out
}

// effectiveDefaults is the configuration of a file that sets nothing but
// one pipeline's name: every default, derived ones included.
func effectiveDefaults() *Config {
	c := &Config{Pipelines: []Pipeline{{Name: "uppercase"}}}
	c.applyDefaults()
	return c
}

// field finds the value of a dotted key path in c ("pipelines[]" being its
// first pipeline).
func field(c *Config, path string) (reflect.Value, bool) {
	v := reflect.ValueOf(c).Elem()
	for _, part := range strings.Split(path, ".") {
		if part == "pipelines[]" {
			v = v.FieldByName("Pipelines").Index(0)
			continue
		}
		found := false
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).Tag.Get("koanf") == part {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return reflect.Value{}, false
		}
	}
	return v, true
}

// decodeLike decodes the YAML value s as Load would into a value of t.
func decodeLike(s string, t reflect.Type) (reflect.Value, error) {
	m, err := yaml.Parser().Unmarshal([]byte("v: " + s))
	if err != nil {
		return reflect.Value{}, err
	}
	out := reflect.New(t)
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(), mapstructure.StringToSliceHookFunc(","), integerHook()),
		WeaklyTypedInput: true,
		TagName:          "koanf",
		Result:           out.Interface(),
	})
	if err != nil {
		return reflect.Value{}, err
	}
	if err := dec.Decode(m["v"]); err != nil {
		return reflect.Value{}, err
	}
	return out.Elem(), nil
}

// same compares a default with a stated value: pointers by what they point
// to, an unset list like an empty one.
func same(a, b reflect.Value) bool {
	a, b = reflect.Indirect(a), reflect.Indirect(b)
	if a.Kind() == reflect.Slice && a.Len() == 0 && b.Len() == 0 {
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// flatten expands a stated section in flow style ("{min: 0, max: 2}") into
// one stated key per entry.
func flatten(t *testing.T, k statedKey) []statedKey {
	if !strings.HasPrefix(k.value, "{") {
		return []statedKey{k}
	}
	m, err := yaml.Parser().Unmarshal([]byte("v: " + k.value))
	if err != nil {
		t.Fatalf("config.yaml:%d: %v", k.line, err)
	}
	var out []statedKey
	for name, v := range m["v"].(map[string]any) {
		sub := k
		sub.path = k.path + "." + name
		sub.value = fmt.Sprint(v)
		if l, ok := v.([]any); ok {
			sub.value = strings.Trim(fmt.Sprint(l), "[]")
		}
		out = append(out, sub)
	}
	return out
}

// config.yaml states every default as a commented-out key, or sets the key
// and names its default in the comment ("(default 5s)", "none (default)").
// Each must equal the defaults table (defaults.go), and every key with a
// default must be in the file: the table is the one statement of each
// default, the file its copy for readers.
func TestReferenceConfigStatesDefaults(t *testing.T) {
	def := effectiveDefaults()
	hostname := def.Host.ID
	mentioned := map[string]bool{}
	check := func(k statedKey, what, value string) {
		f, ok := field(def, k.path)
		if !ok {
			t.Errorf("config.yaml:%d: %s is no config key", k.line, k.path)
			return
		}
		value = strings.NewReplacer("<group>", def.GroupID(&def.Pipelines[0]), "<name>", "uppercase", "<hostname>", hostname).Replace(value)
		got, err := decodeLike(value, f.Type())
		if err != nil {
			t.Errorf("config.yaml:%d: %s: %s %q: %v", k.line, k.path, what, value, err)
			return
		}
		if !same(f, got) {
			t.Errorf("config.yaml:%d: %s: %s %s, but its default is %v (scheduler/config/defaults.go)", k.line, k.path, what, value, reflect.Indirect(f))
		}
	}
	for _, stated := range readReference(t) {
		for _, k := range flatten(t, stated) {
			mentioned[k.path] = true
			f, ok := field(def, k.path)
			switch {
			case !ok:
				t.Errorf("config.yaml:%d: %s is no config key", k.line, k.path)
			case k.commented && k.value != Auto && !exampleKeys[k.path]:
				check(k, "states the default", k.value)
			case defaultMarkRE.MatchString(k.comment):
				check(k, "names the default", defaultMarkRE.FindStringSubmatch(k.comment)[1])
			case defaultMarkRE2.MatchString(k.comment):
				check(k, "names the default", defaultMarkRE2.FindStringSubmatch(k.comment)[1])
			case !k.commented && k.first && !f.IsZero():
				if v, err := decodeLike(k.value, f.Type()); err != nil || !same(f, v) {
					t.Errorf("config.yaml:%d: %s is set to %s, not its default %v: say which is the default in its comment, \"(default X)\"", k.line, k.path, k.value, reflect.Indirect(f))
				}
			}
		}
	}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		for i := 0; i < v.NumField(); i++ {
			tag := v.Type().Field(i).Tag.Get("koanf")
			f := v.Field(i)
			if tag == "" || tag == "-" || f.IsZero() {
				continue
			}
			key := strings.TrimPrefix(path+"."+tag, ".")
			switch {
			case f.Kind() == reflect.Struct && f.Type() != durationType:
				walk(f, key)
			case key == "pipelines":
				walk(f.Index(0), "pipelines[]")
			case key == "pipelines[].name":
			case !mentioned[key]:
				t.Errorf("config.yaml does not state the default of %s (%v)", key, reflect.Indirect(f))
			}
		}
	}
	walk(reflect.ValueOf(def).Elem(), "")
}

// A key whose default is true must be a *bool: applyDefaults fills zero
// values, so a plain bool defaulting to true could never be set to false.
func TestDefaultsNoTrueBool(t *testing.T) {
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		for i := 0; i < v.NumField(); i++ {
			f, key := v.Field(i), path+"."+v.Type().Field(i).Name
			switch {
			case f.Kind() == reflect.Bool && f.Bool():
				t.Errorf("%s defaults to true: make it a *bool", key)
			case f.Kind() == reflect.Struct:
				walk(f, key)
			}
		}
	}
	walk(reflect.ValueOf(Defaults()), "Config")
	walk(reflect.ValueOf(PipelineDefaults()), "Pipeline")
}
