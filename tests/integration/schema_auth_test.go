//go:build integration

package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/wasmstream/wasmstream/internal/schemareg"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// secureRegistry is the registry the test command starts with TLS and
// basic auth (tests/schemareg/apicurio.sh, APICURIO_SECURE=1): a second
// Apicurio serving https only with a certificate of a private CA made at
// its start, and one user.
type secureRegistry struct {
	url, caFile, user, passwordFile string
}

func secureRegistryEnv(t *testing.T) secureRegistry {
	t.Helper()
	s := secureRegistry{os.Getenv("SCHEMA_REGISTRY_SECURE_URL"), os.Getenv("SCHEMA_REGISTRY_SECURE_CA_FILE"),
		os.Getenv("SCHEMA_REGISTRY_SECURE_USER"), os.Getenv("SCHEMA_REGISTRY_SECURE_PASSWORD_FILE")}
	if s.url == "" || s.caFile == "" || s.user == "" || s.passwordFile == "" {
		t.Fatal("SCHEMA_REGISTRY_SECURE_URL, _CA_FILE, _USER and _PASSWORD_FILE are not set: the test command starts that registry (APICURIO_SECURE=1 tests/schemareg/apicurio.sh start)")
	}
	return s
}

func (s secureRegistry) password(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(s.passwordFile)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// admin is a client of the registry of the test's own, as a producer's
// serializer with the right CA and credentials.
func (s secureRegistry) admin(t *testing.T) *sr.Client {
	t.Helper()
	pem, err := os.ReadFile(s.caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", s.caFile)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	cl, err := sr.NewClient(sr.URLs(s.url), sr.HTTPClient(hc), sr.BasicAuth(s.user, s.password(t)))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// secureRegistryYAML is a pipeline of the uppercase processor that
// decodes its input values with the registry of section (the
// schema_registry section's lines).
func secureRegistryYAML(brokers []string, n, in, out, dlq, section string) string {
	return schemaPipelineYAML(brokers, n, section, schemaPipe{name: "p", inputs: []string{in}, out: out, dlq: dlq})
}

// TestSchemaRegistryTLSAndBasicAuth: against the real registry configured
// for TLS with a private CA and basic auth (Apicurio, its embedded users,
// no identity server), a host given schema_registry.tls.ca_file and the
// user's password starts and decodes framed records for its processor.
// Each wrong setting fails the start, before any pipeline and within
// seconds, with an error naming the key to fix: no ca_file (the system
// roots do not know the private CA: "unknown authority"), a wrong password
// (HTTP 401, schema_registry.basic_auth), no credentials, a host name the
// certificate does not carry (schema_registry.tls.server_name), and a
// registry address that takes the connection and never answers
// (schema_registry.request_timeout).
func TestSchemaRegistryTLSAndBasicAuth(t *testing.T) {
	t.Parallel() // owns its topics and group; its only timing is its bounds on failing fast
	brokers := kafkatest.RealBrokers(t)
	reg := secureRegistryEnv(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 1, in, out, dlq)
	ctx, cancel := ctxTimeout(3 * time.Minute)
	defer cancel()
	admin := reg.admin(t)
	if _, err := admin.CreateSchema(ctx, in+"-value", sr.Schema{Schema: userAvro, Type: sr.TypeAvro}); err != nil {
		t.Fatalf("registering %s-value with the right CA and password: %v", in, err)
	}

	dir := t.TempDir()
	pwFile := func(name, pw string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := pwFile("good", reg.password(t))
	wrong := pwFile("wrong", "not-the-password")
	section := func(url, tls, auth string) string {
		return fmt.Sprintf("  url: %s\n  request_timeout: 3s\n%s%s", url, tls, auth)
	}
	caKey := fmt.Sprintf("  tls: {ca_file: %s}\n", reg.caFile)
	authKey := func(pw string) string {
		return fmt.Sprintf("  basic_auth: {username: %s, password_file: %s}\n", reg.user, pw)
	}

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 8)
	go func() { // ends when silent is closed; holds the connections, never answers
		for {
			c, err := silent.Accept()
			if err != nil {
				close(held)
				return
			}
			held <- c
		}
	}()
	defer func() {
		silent.Close()
		for c := range held {
			c.Close()
		}
	}()

	for _, tc := range []struct {
		name, section string
		want          []string
	}{
		{"no ca_file", section(reg.url, "", authKey(good)),
			[]string{"schema_registry.tls.ca_file", "unknown authority", "not trusted", "the system roots", "wasmstream-test-ca"}},
		{"wrong password", section(reg.url, caKey, authKey(wrong)),
			[]string{"schema_registry.basic_auth", "HTTP 401", fmt.Sprintf("user %q", reg.user), "wrong username or password"}},
		{"no credentials", section(reg.url, caKey, ""),
			[]string{"HTTP 401", "set schema_registry.basic_auth or schema_registry.token_file"}},
		{"a name the certificate lacks", section(strings.Replace(reg.url, "127.0.0.1", "localhost", 1), caKey, authKey(good)),
			[]string{"schema_registry.tls.server_name", `"localhost"`, "it names 127.0.0.1"}},
		{"never answers", section("https://"+silent.Addr().String(), caKey, authKey(good)),
			[]string{"no answer within 3s (schema_registry.request_timeout)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r, _, err := newSchemaHost(t, t.TempDir(), secureRegistryYAML(brokers, n, in, out, dlq, tc.section))
			took := time.Since(start)
			if err == nil {
				r.Stop(context.Background())
				t.Fatal("started")
			}
			t.Logf("failed in %s: %v", took.Round(time.Millisecond), err)
			for _, w := range append(tc.want, "schema_registry: ") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
			if strings.Contains(err.Error(), "not-the-password") || strings.Contains(err.Error(), reg.password(t)) {
				t.Errorf("the error shows a password: %v", err)
			}
			// Fast: a refusal at once; a silence within request_timeout
			// (3s) and the start's other work.
			if took > 10*time.Second {
				t.Errorf("took %s to fail", took)
			}
		})
	}

	// The right CA and password: the host starts and its processor reads
	// the records' JSON.
	cl, err := schemareg.New(schemareg.Config{URL: reg.url, Username: reg.user, PasswordFile: good, TLS: schemareg.TLS{CAFile: reg.caFile}})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := cl.NewEncoder(ctx, schemareg.EncoderConfig{Subject: in + "-value"})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	const total = 50
	produceUsers(t, ctx, kafkatest.Client(t, brokers), enc, 0, total, func(int) string { return in })
	r, _, err := newSchemaHost(t, t.TempDir(), secureRegistryYAML(brokers, n, in, out, dlq, section(reg.url, caKey, authKey(good))))
	if err != nil {
		t.Fatalf("with the CA and the password: %v", err)
	}
	r.Start()
	defer r.Stop(context.Background())
	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, 2*time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= total })
	for _, rec := range rd.Recs {
		var doc map[string]any
		if err := json.Unmarshal(rec.Value, &doc); err != nil {
			t.Fatalf("output %s is not the decoded JSON upper-cased: %q", rec.Key, rec.Value)
		}
		if doc["NAME"] != "USER-"+string(rec.Key) || fmt.Sprint(doc["ID"]) != string(rec.Key) {
			t.Fatalf("output %s: %s", rec.Key, rec.Value)
		}
	}
	if s := r.Snapshots()[0]; s.DeadLetter != 0 {
		t.Fatalf("%d dead letters", s.DeadLetter)
	}
	if st := r.SchemaStats(); st.RequestErrors.Load() != 0 {
		t.Fatalf("%d registry requests failed of %d", st.RequestErrors.Load(), st.Requests.Load())
	}
}
