package config

import (
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
)

// EnvPrefix is the prefix of environment variables that override config keys:
// WASMSTREAM_KAFKA_BROKERS overrides kafka.brokers.
const EnvPrefix = "WASMSTREAM_"

// reservedEnv are WASMSTREAM_ variables that are not config keys.
var reservedEnv = map[string]bool{
	"WASMSTREAM_CACHE":       true, // cache directory of the test scripts
	"WASMSTREAM_ADMIN_TOKEN": true, // admin API token
}

// envAliases are environment variables that set a key under a name other
// than the key's own: the registry's password has the short name the
// README gives (WASMSTREAM_SCHEMA_REGISTRY_PASSWORD).
var envAliases = map[string]string{schemaPasswordEnv: "schema_registry.basic_auth.password"}

// Load reads the configuration: the YAML file at path (may be ""), then the
// environment (environ, KEY=VALUE), then sets ("key=value", from flags),
// each overriding the one before; a set pipelines.<name>.<key>=value sets
// a key of the pipeline of that name. It checks for unknown keys, applies
// defaults and validates. Every problem of the three sources is reported
// at once.
func Load(path string, environ []string, sets []string) (*Config, error) {
	k := koanf.New(".")
	cfg := &Config{}
	secrets := secretLeaves(reflect.TypeOf(Config{}), "")
	probs, err := loadFile(k, cfg, path, secrets)
	if err != nil {
		return nil, err
	}
	leaves := leafKeys(reflect.TypeOf(Config{}), "")
	envMap, envProbs := envOverrides(environ, leaves)
	sets, pipeSets := splitPipelineSets(sets)
	setMap, setProbs := setOverrides(sets, leaves, secrets)
	probs = append(append(probs, envProbs...), setProbs...)
	for _, m := range []map[string]any{envMap, setMap} {
		if err := k.Load(confmap.Provider(m, "."), nil); err != nil {
			return nil, err
		}
	}
	raw := k.Raw()
	probs = append(probs, applyPipelineSets(raw, pipeSets)...)
	autos := takeAutos(raw)
	if len(autos) > 0 || len(pipeSets) > 0 {
		// The "auto" values are taken out (they are no numbers or sections
		// of keys) and given to the typed config after decoding; the
		// pipelines' --set values are in raw's pipelines.
		k = koanf.New(".")
		if err := k.Load(confmap.Provider(raw, ""), nil); err != nil {
			return nil, err
		}
	}
	probs = append(probs, unknownKeys(raw, reflect.TypeOf(Config{}), "")...)
	if len(probs) > 0 {
		return nil, probs
	}
	if err := decode(k, cfg); err != nil {
		return nil, err
	}
	applyAutos(cfg, autos)
	cfg.applyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// loadFile loads the YAML file at path into k (nothing when path is "")
// and sets cfg.Dir to its directory. A secret given in it is a problem.
func loadFile(k *koanf.Koanf, cfg *Config, path string, secrets map[string]string) (Problems, error) {
	if path == "" {
		return nil, nil
	}
	if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	cfg.Dir = filepath.Dir(abs)
	var probs Problems
	for _, key := range sortedKeys(secrets) {
		if v := k.Get(key); v != nil && v != "" {
			probs = append(probs, secretRefused(key, secrets[key], "the config file"))
		}
	}
	return probs, nil
}

// envOverrides are the keys the WASMSTREAM_ variables of environ set, and
// a problem for each that names no key.
func envOverrides(environ []string, leaves map[string]string) (map[string]any, Problems) {
	envMap := map[string]any{}
	var probs Problems
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) || reservedEnv[name] {
			continue
		}
		key, found := envKey(name, leaves)
		if !found {
			probs = append(probs, fmt.Sprintf("environment variable %s: matches no config key (keys inside pipelines cannot be set from the environment)", name))
			continue
		}
		envMap[key] = val
	}
	return envMap, probs
}

// setOverrides are the keys sets ("key=value", from flags) set, and a
// problem for each that is not key=value, names no key or names a secret.
// No value given here reaches an error (secrets.go).
func setOverrides(sets []string, leaves, secrets map[string]string) (map[string]any, Problems) {
	setMap := map[string]any{}
	var probs Problems
	for _, s := range sets {
		key, val, ok := strings.Cut(s, "=")
		_, found := leaves[strings.ReplaceAll(key, ".", "_")]
		file, secret := secrets[key]
		switch {
		case !ok && looksSecret(s):
			probs = append(probs, "--set: an argument is not key=value (not shown: it names a key that may hold a secret)")
		case !ok:
			probs = append(probs, fmt.Sprintf("--set %q: want key=value", s))
		case !found:
			probs = append(probs, unknownSet(key, leaves, secrets))
		case secret:
			probs = append(probs, secretRefused(key, file, "--set"))
		default:
			setMap[key] = val
		}
	}
	return setMap, probs
}

// unknownSet is the problem of --set key, a key that does not exist: the
// key it likely meant, and how to set that one if it is a secret.
func unknownSet(key string, leaves, secrets map[string]string) string {
	msg := fmt.Sprintf("--set %s: unknown key (a pipeline's keys are set by its name, pipelines.<name>.<key>=value; the value given is not shown)", key)
	if near, ok := closestKey(key, leaves); ok {
		msg += "; did you mean " + near + "?"
		if file, secret := secrets[near]; secret {
			msg += " (a secret: never on --set; set " + file + " or the environment variable " + EnvPrefix + strings.ToUpper(strings.ReplaceAll(near, ".", "_")) + ")"
		}
	}
	return msg
}

// decode decodes k's keys into cfg.
func decode(k *koanf.Koanf, cfg *Config) error {
	dc := &mapstructure.DecoderConfig{
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","),
			integerHook(),
		),
		WeaklyTypedInput: true,
		TagName:          "koanf",
		Result:           cfg,
	}
	if err := k.UnmarshalWithConf("", cfg, koanf.UnmarshalConf{Tag: "koanf", DecoderConfig: dc}); err != nil {
		return decodeProblems(err)
	}
	return nil
}

// applyAutos gives the keys set to auto (takeAutos) to the decoded cfg.
func applyAutos(cfg *Config, autos []autoKey) {
	for _, a := range autos {
		if a.pipeline >= len(cfg.Pipelines) {
			continue
		}
		p := &cfg.Pipelines[a.pipeline]
		switch a.key {
		case "instances":
			p.Instances.Auto = true
		case "retry.instances":
			p.Retry.Instances.Auto = true
		case "async.max_in_flight":
			p.Async.AutoInFlight = true
		}
	}
}

// envKey is the key environment variable name sets: its alias's, or the
// leaf its name spells.
func envKey(name string, leaves map[string]string) (string, bool) {
	if alias, ok := envAliases[name]; ok {
		return alias, true
	}
	key, found := leaves[strings.ToLower(strings.TrimPrefix(name, EnvPrefix))]
	return key, found
}

// autoKey is a key of a pipeline set to auto.
type autoKey struct {
	pipeline int
	key      string // "instances" (instances: auto or instances.max: auto), "retry.instances", "async.max_in_flight"
}

// takeAutos finds the keys set to auto in raw (the merged config as maps),
// removes them, and returns where they were: instances: auto becomes an
// empty instances section, instances.max: auto and async.max_in_flight:
// auto are left unset.
func takeAutos(raw map[string]any) []autoKey {
	list, _ := raw["pipelines"].([]any)
	var out []autoKey
	isAuto := func(v any) bool {
		s, ok := v.(string)
		return ok && strings.TrimSpace(s) == Auto
	}
	// section returns the section m[name], a map, or nil; an auto value
	// is replaced by an empty section and reported by auto.
	section := func(m map[string]any, name string) (sec map[string]any, auto bool) {
		if isAuto(m[name]) {
			sec = map[string]any{}
			m[name] = sec
			return sec, true
		}
		sec, _ = m[name].(map[string]any)
		return sec, false
	}
	for i, el := range list {
		p, ok := el.(map[string]any)
		if !ok {
			continue
		}
		if in, auto := section(p, "instances"); auto || (in != nil && isAuto(in["max"])) {
			delete(in, "max")
			out = append(out, autoKey{i, "instances"})
		}
		if rt, _ := p["retry"].(map[string]any); rt != nil {
			if in, auto := section(rt, "instances"); auto || (in != nil && isAuto(in["max"])) {
				delete(in, "max")
				out = append(out, autoKey{i, "retry.instances"})
			}
		}
		if as, _ := p["async"].(map[string]any); as != nil && isAuto(as["max_in_flight"]) {
			delete(as, "max_in_flight")
			out = append(out, autoKey{i, "async.max_in_flight"})
		}
	}
	return out
}

var decodeErrRE = regexp.MustCompile(`^'([^' ]+)' (.*)$`)

func decodeProblems(err error) error {
	var probs Problems
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "*"))
		if line == "" || strings.HasPrefix(line, "decoding failed due to") || strings.HasSuffix(line, "error(s) decoding:") {
			continue
		}
		if m := decodeErrRE.FindStringSubmatch(line); m != nil {
			line = m[1] + ": " + m[2] // the decoder's "'key' problem" as Validate says it
			if looksSecret(m[1]) {
				// The decoder's message quotes the value.
				line = m[1] + ": the value given cannot be used here (not shown: the key may hold a secret)"
			}
		} else if looksSecret(line) {
			line = "a value cannot be decoded (not shown: its key may hold a secret)"
		}
		probs = append(probs, line)
	}
	if len(probs) == 0 {
		return err
	}
	return probs
}

// leafKeys maps the underscore-joined form of every settable non-list key
// ("kafka_brokers") to its dotted form ("kafka.brokers").
func leafKeys(t reflect.Type, prefix string) map[string]string {
	out := map[string]string{}
	eachLeaf(t, prefix, func(key string, f reflect.StructField) {
		if f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct {
			return // lists of sections are set in the file only
		}
		out[strings.ReplaceAll(key, ".", "_")] = key
	})
	return out
}

// eachLeaf calls f with the dotted key of every field of t that is a key
// and not a section of keys (a nested struct, whose keys it visits), and
// the field: the one walk of the keys by type (leafKeys, secretLeaves).
func eachLeaf(t reflect.Type, prefix string, f func(key string, field reflect.StructField)) {
	for i := 0; i < t.NumField(); i++ {
		field := t.Field(i)
		tag := field.Tag.Get("koanf")
		if tag == "" || tag == "-" {
			continue
		}
		key := tag
		if prefix != "" {
			key = prefix + "." + tag
		}
		if field.Type.Kind() == reflect.Struct && field.Type != reflect.TypeOf(time.Duration(0)) {
			eachLeaf(field.Type, key, f)
			continue
		}
		f(key, field)
	}
}

// unknownKeys walks raw (the merged config as maps) against t and names every
// key that matches no field.
func unknownKeys(raw map[string]any, t reflect.Type, prefix string) []string {
	fields := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag := f.Tag.Get("koanf"); tag != "" && tag != "-" {
			fields[tag] = f.Type
		}
	}
	var out []string
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		ft, ok := fields[k]
		if !ok {
			known := make([]string, 0, len(fields))
			for f := range fields {
				known = append(known, f)
			}
			sort.Strings(known)
			out = append(out, fmt.Sprintf("%s: unknown key (known here: %s)", path, strings.Join(known, ", ")))
			continue
		}
		switch {
		case ft.Kind() == reflect.Struct && ft != reflect.TypeOf(time.Duration(0)):
			if m, ok := raw[k].(map[string]any); ok {
				out = append(out, unknownKeys(m, ft, path)...)
			} else if raw[k] != nil {
				out = append(out, fmt.Sprintf("%s: want a section of keys, got %s", path, shown(path, raw[k])))
			}
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			list, ok := raw[k].([]any)
			if !ok {
				if raw[k] != nil {
					out = append(out, fmt.Sprintf("%s: want a list, got %s", path, shown(path, raw[k])))
				}
				continue
			}
			for i, el := range list {
				m, ok := el.(map[string]any)
				if !ok {
					out = append(out, fmt.Sprintf("%s[%d]: want a section of keys, got %s", path, i, shown(path, el)))
					continue
				}
				out = append(out, unknownKeys(m, ft.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	}
	return out
}

// shown is v as an error may show it: not at all when key looks secret.
func shown(key string, v any) string {
	if looksSecret(key) {
		return fmt.Sprintf("a %T (not shown: the key may hold a secret)", v)
	}
	return fmt.Sprint(v)
}
