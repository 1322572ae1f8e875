package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestKafkaSecurityConfig: kafka.tls and kafka.sasl load from the file, the
// environment and flags, relative paths are the config file's directory's,
// and each mistake is named by its key without repeating a secret.
func TestKafkaSecurityConfig(t *testing.T) {
	real := []string{"WASMSTREAM_KAFKA_BROKERS=b-1.example.kafka.eu-west-1.amazonaws.com:9098"}
	path := write(t, good)
	c, err := Load(path, append(real, "WASMSTREAM_KAFKA_SASL_PASSWORD=s3cret-from-env"), []string{
		"kafka.tls.enabled=true", "kafka.tls.ca_file=certs/ca.pem", "kafka.sasl.mechanism=SCRAM-SHA-512", "kafka.sasl.username=wasmstream"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Kafka.SASL.Password != "s3cret-from-env" || c.Kafka.TLS.CAFile != filepath.Join(filepath.Dir(path), "certs/ca.pem") {
		t.Fatalf("loaded %+v %+v", c.Kafka.TLS, c.Kafka.SASL)
	}
	for _, s := range []string{c.Kafka.SASL.String(), fmt.Sprint(c.Kafka.SASL), fmt.Sprintf("%v", c.Kafka), fmt.Sprintf("%+v", c.Kafka)} {
		if strings.Contains(s, "s3cret-from-env") {
			t.Fatalf("printed config holds the password: %s", s)
		}
	}
	if _, err := Load(path, real, []string{"kafka.tls.enabled=true", "kafka.sasl.mechanism=AWS_MSK_IAM", "kafka.sasl.region=eu-west-1"}); err != nil {
		t.Fatalf("AWS_MSK_IAM: %v", err)
	}
	for _, tc := range []struct {
		name string
		env  []string
		sets []string
		want string
	}{
		{"unknown mechanism", real, []string{"kafka.sasl.mechanism=GSSAPI", "kafka.sasl.username=u"}, `kafka.sasl.mechanism: "GSSAPI" is not a SASL mechanism`},
		{"lower case mechanism", real, []string{"kafka.sasl.mechanism=scram-sha-512", "kafka.sasl.username=u"}, `kafka.sasl.mechanism: "scram-sha-512"`},
		{"no password", real, []string{"kafka.sasl.mechanism=PLAIN", "kafka.sasl.username=u"}, "kafka.sasl.password_file: PLAIN needs a password"},
		{"no username", real, []string{"kafka.sasl.mechanism=SCRAM-SHA-256", "kafka.sasl.password_file=/p"}, "kafka.sasl.username: SCRAM-SHA-256 needs a username"},
		{"both passwords", append(real, "WASMSTREAM_KAFKA_SASL_PASSWORD=hunter2hunter2"), []string{"kafka.sasl.mechanism=PLAIN", "kafka.sasl.username=u", "kafka.sasl.password_file=/p"}, "kafka.sasl.password: both password and password_file are set"},
		{"no token file", real, []string{"kafka.sasl.mechanism=OAUTHBEARER"}, "kafka.sasl.token_file: OAUTHBEARER needs token_file"},
		{"password without mechanism", real, []string{"kafka.sasl.password_file=/p"}, "kafka.sasl.password_file: is set but kafka.sasl.mechanism is not"},
		{"ca without tls", real, []string{"kafka.tls.ca_file=/ca.pem"}, "kafka.tls.ca_file: is set but kafka.tls.enabled is false"},
		{"cert without key", real, []string{"kafka.tls.enabled=true", "kafka.tls.cert_file=/c.pem"}, "kafka.tls.cert_file: cert_file and key_file go together"},
		{"aws without tls", real, []string{"kafka.sasl.mechanism=AWS_MSK_IAM"}, "kafka.tls.enabled: AWS_MSK_IAM is served on MSK's TLS listeners only"},
		{"aws with a password", real, []string{"kafka.tls.enabled=true", "kafka.sasl.mechanism=AWS_MSK_IAM", "kafka.sasl.password_file=/p"}, "AWS_MSK_IAM takes its credentials from the AWS environment"},
		{"embedded with tls", nil, []string{"kafka.tls.enabled=true"}, "kafka.tls: the embedded broker speaks plaintext only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(path, tc.env, tc.sets)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2hunter2") {
				t.Fatalf("error holds the password: %v", err)
			}
		})
	}
}
