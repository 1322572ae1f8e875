package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Secrets never sit in the config file nor on the command line (README.md,
// "Connecting to a secured cluster"): a config file is copied, committed
// and shown; a --set is in the process's argv, which every local user may
// read (ps, /proc/<pid>/cmdline). A key that holds a secret itself (the
// field's secret tag names the key of the file that holds it instead) is
// taken from the environment only, and refused, naming the key and the
// safer ways, in the file and on --set. The embedded broker takes no
// secret at all (it speaks plaintext, checkKafkaSecurity): the rule is the
// same everywhere.
//
// A value given for a key that looks secret is never repeated in an
// error: an unknown --set key (a mistyped kafka.sasl.pasword=...) is named
// without its value, and a value that does not decode is not shown when
// its key looks secret (looksSecret).

// secretLeaves maps the dotted key of every field of t tagged secret to
// the key of the file that holds the secret instead.
func secretLeaves(t reflect.Type, prefix string) map[string]string {
	out := map[string]string{}
	eachLeaf(t, prefix, func(key string, f reflect.StructField) {
		if file, ok := f.Tag.Lookup("secret"); ok {
			out[key] = file
		}
	})
	return out
}

// secretRefused is the problem of secret key given in the file or on
// --set (where), without its value.
func secretRefused(key, file, where string) string {
	env := EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
	for name, k := range envAliases {
		if k == key {
			env = name
		}
	}
	why := "a secret never sits in the config file, which is copied and shown"
	if where == "--set" {
		key = "--set " + key
		why = "a secret on the command line is readable by every local user (ps, /proc/<pid>/cmdline)"
	}
	return fmt.Sprintf("%s: refused: %s; put it in a file only its owner may read (chmod 600) and set %s, or set the environment variable %s (README.md, \"Connecting to a secured cluster\")",
		key, why, file, env)
}

// secretWords are parts of a key's name that say it may hold a secret, or
// a section of secrets; mistyped forms included, since a mistyped key is
// the one most likely to be reported.
var secretWords = []string{"pass", "pasw", "pwd", "secret", "secert", "token", "tokn", "cred", "auth", "key", "private", "sasl", "tls", "cert"}

// looksSecret reports whether key (dotted, or an environment variable's
// name) may hold a secret: its value is then never shown in an error.
func looksSecret(key string) bool {
	k := strings.ToLower(key)
	for _, w := range secretWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// closestKey is the settable key nearest to key by edit distance, if one
// is within 2 edits: the key a mistyped --set meant.
func closestKey(key string, leaves map[string]string) (string, bool) {
	keys := make([]string, 0, len(leaves))
	for _, k := range leaves {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	best, bestD := "", 3
	for _, k := range keys {
		if d := editDistance(key, k, bestD); d < bestD {
			best, bestD = k, d
		}
	}
	return best, best != ""
}

// editDistance is the Levenshtein distance of a and b, or max when it is
// at least max (the rows are cut short).
func editDistance(a, b string, max int) int {
	if d := len(a) - len(b); d >= max || -d >= max {
		return max
	}
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c = 1 + min(prev[j-1], prev[j], cur[j-1])
			}
			cur[j] = c
			rowMin = min(rowMin, c)
		}
		if rowMin >= max {
			return max
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], max)
}
