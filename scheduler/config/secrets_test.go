package config

import (
	"strings"
	"testing"
)

// TestSecretsNeverInFileOrFlags: kafka.sasl.password is taken from the
// environment only; in the config file or on --set (argv, readable by
// every local user) it is refused, naming the key, password_file and the
// environment variable. No error repeats a value given for a key that
// looks secret: a mistyped --set kafka.sasl.pasword=..., a --set that is
// not key=value, a secret section given a string, a value that does not
// decode (before: the password was accepted from both, and the mistyped
// --set echoed the secret in its error).
func TestSecretsNeverInFileOrFlags(t *testing.T) {
	const secret = "hunter2hunter2"
	real := []string{"WASMSTREAM_KAFKA_BROKERS=broker-1.example:9093"}
	sasl := []string{"kafka.tls.enabled=true", "kafka.sasl.mechanism=SCRAM-SHA-512", "kafka.sasl.username=app"}
	withPassword := strings.Replace(good, "kafka:\n", "kafka:\n  sasl: {mechanism: SCRAM-SHA-512, username: app, password: "+secret+"}\n  tls: {enabled: true}\n", 1)
	c, err := Load(write(t, good), append(real, "WASMSTREAM_KAFKA_SASL_PASSWORD="+secret), sasl)
	if err != nil || c.Kafka.SASL.Password != secret {
		t.Fatalf("the password from the environment: %v", err)
	}
	for _, tc := range []struct {
		name string
		yaml string
		sets []string
		want []string
	}{
		{"in the file", withPassword, nil,
			[]string{"kafka.sasl.password: refused", "config file", "kafka.sasl.password_file", "WASMSTREAM_KAFKA_SASL_PASSWORD"}},
		{"on --set", good, append(sasl, "kafka.sasl.password="+secret),
			[]string{"--set kafka.sasl.password: refused", "every local user", "kafka.sasl.password_file", "WASMSTREAM_KAFKA_SASL_PASSWORD"}},
		{"mistyped on --set", good, append(sasl, "kafka.sasl.pasword="+secret),
			[]string{"--set kafka.sasl.pasword: unknown key", "did you mean kafka.sasl.password?", "kafka.sasl.password_file"}},
		{"mistyped section on --set", good, []string{"kafka.sals.password=" + secret}, []string{"--set kafka.sals.password: unknown key"}},
		{"not key=value", good, []string{"kafka.sasl.password:" + secret}, []string{"--set: an argument is not key=value"}},
		{"a string for the sasl section", strings.Replace(good, "kafka:\n", "kafka:\n  sasl: "+secret+"\n", 1), nil, []string{"kafka.sasl: want a section of keys"}},
		{"a list for a secret-looking key", strings.Replace(good, "kafka:\n", "kafka:\n  sasl: {username: ["+secret+"]}\n", 1), nil, []string{"kafka.sasl.username: the value given cannot be used here"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(write(t, tc.yaml), real, tc.sets)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error repeats the secret: %v", err)
			}
		})
	}
	// A mistyped key that holds no secret is named with the key meant.
	if _, err := Load(write(t, good), nil, []string{"kafka.grop=g1"}); err == nil || !strings.Contains(err.Error(), "did you mean kafka.group?") {
		t.Errorf("a mistyped --set: %v", err)
	}
}

func TestLooksSecret(t *testing.T) {
	for key, want := range map[string]bool{
		"kafka.sasl.password": true, "kafka.sasl.pasword": true, "kafka.tls.key_file": true, "admin.token_file": true,
		"WASMSTREAM_KAFKA_SASL_PASSWORD": true, "pipelines[0].env[API_KEY]": true, "x.client_secret": true,
		"kafka.group": false, "limits.record_timeout": false, "kafka.brokers": false,
	} {
		if got := looksSecret(key); got != want {
			t.Errorf("looksSecret(%q) = %v, want %v", key, got, want)
		}
	}
}
