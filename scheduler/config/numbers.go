package config

import (
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
)

// Integer keys are decoded strictly: YAML, the environment and flags give
// numbers as int, float64, bool or string, and the weakly typed decoder would
// truncate 2.9 to 2, wrap 4294967297 to 1 in a uint32, and read true as 1.
// integerHook refuses all of these for every integer field of Config
// (durations excepted: they are int64 but decoded from "5s"-style strings),
// and negativeKeys names integer keys set below zero, which no key of
// wasmstream gives a meaning to. Ranges that depend on the key stay in
// Validate.

var durationType = reflect.TypeOf(time.Duration(0))

// integerHook is a mapstructure decode hook, run by Load for every value
// decoded into Config: a value bound for an integer field must be a whole
// number that fits the field's type; it is handed on as an int64 or uint64.
// mapstructure prefixes its errors with the key.
func integerHook() mapstructure.DecodeHookFuncValue {
	return func(from, to reflect.Value) (any, error) {
		if !from.IsValid() || !isInteger(to.Type()) {
			return from.Interface(), nil
		}
		n, err := wholeNumber(from)
		if err != nil || n == nil {
			return from.Interface(), err
		}
		lo, hi := bounds(to.Type())
		switch {
		case n.Cmp(hi) > 0:
			return nil, fmt.Errorf("%v is too large: want at most %s", from.Interface(), hi)
		case n.Cmp(lo) < 0 && lo.Sign() == 0:
			return nil, fmt.Errorf("%v is negative: want 0 to %s", from.Interface(), hi)
		case n.Cmp(lo) < 0:
			return nil, fmt.Errorf("%v is too small: want at least %s", from.Interface(), lo)
		}
		if to.Kind() >= reflect.Uint && to.Kind() <= reflect.Uintptr {
			return n.Uint64(), nil
		}
		return n.Int64(), nil
	}
}

// isInteger reports whether t is an integer type other than time.Duration.
func isInteger(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return t != durationType
	}
	return false
}

// wholeNumber reads v as an integer; nil, nil leaves v to the decoder (a
// string that is no number at all, an empty string, a kind it reports).
func wholeNumber(v reflect.Value) (*big.Int, error) {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return big.NewInt(v.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return new(big.Int).SetUint64(v.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return wholeFloat(v.Float())
	case reflect.Bool:
		return nil, fmt.Errorf("%v is not a number", v.Bool())
	case reflect.String:
		s := strings.TrimSpace(v.String())
		if s == "" {
			return nil, nil
		}
		if n, ok := new(big.Int).SetString(s, 0); ok {
			return n, nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return wholeFloat(f)
		}
	}
	return nil, nil
}

func wholeFloat(f float64) (*big.Int, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) {
		return nil, fmt.Errorf("%v is not a whole number", f)
	}
	n, _ := big.NewFloat(f).Int(nil)
	return n, nil
}

// bounds is the smallest and largest value of integer type t.
func bounds(t reflect.Type) (lo, hi *big.Int) {
	bits := uint(t.Bits())
	one := big.NewInt(1)
	if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uintptr {
		return new(big.Int), new(big.Int).Sub(new(big.Int).Lsh(one, bits), one)
	}
	hi = new(big.Int).Sub(new(big.Int).Lsh(one, bits-1), one)
	return new(big.Int).Neg(new(big.Int).Lsh(one, bits-1)), hi
}

// negativeKeys returns, for every integer key of v (a Config struct or a
// section of it) set below zero, its key under prefix with its value, in
// field order: "pipelines[0].limits.max_outputs" -> -1.
func negativeKeys(v reflect.Value, prefix string) []keyValue {
	var out []keyValue
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("koanf")
		if tag == "" || tag == "-" {
			continue
		}
		key, f := tag, v.Field(i)
		if prefix != "" {
			key = prefix + "." + tag
		}
		if f.Kind() == reflect.Pointer && !f.IsNil() && isInteger(f.Type().Elem()) {
			f = f.Elem() // an optional number
		}
		switch {
		case isInteger(f.Type()) && f.Kind() <= reflect.Int64:
			if f.Int() < 0 {
				out = append(out, keyValue{key, f.Int()})
			}
		case f.Kind() == reflect.Struct && f.Type() != durationType:
			out = append(out, negativeKeys(f, key)...)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			for j := 0; j < f.Len(); j++ {
				out = append(out, negativeKeys(f.Index(j), fmt.Sprintf("%s[%d]", key, j))...)
			}
		}
	}
	return out
}

type keyValue struct {
	key   string
	value int64
}

// addNegatives adds a problem for each negative integer key of c that no
// problem names yet (Validate's own range checks say more, when they apply).
func (c *Config) addNegatives(probs Problems) Problems {
	for _, kv := range negativeKeys(reflect.ValueOf(c).Elem(), "") {
		named := false
		for _, p := range probs {
			if strings.HasPrefix(p, kv.key+":") {
				named = true
				break
			}
		}
		if !named {
			probs = append(probs, fmt.Sprintf("%s: %d is negative: want 0 or more", kv.key, kv.value))
		}
	}
	return probs
}
