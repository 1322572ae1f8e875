//go:build integration

package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/kafkaconn"
	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// secureBroker is the broker `kafka.sh start --secure` started beside the
// plain one (tests/kafka/secure.sh): its PLAINTEXT listener (a super user,
// for setup), SASL_SSL, SSL (client certificates required) and a SASL_SSL
// listener with PLAIN only, and the directory of its CA, client
// certificate and users' passwords.
type secureBroker struct {
	plain, saslSSL, ssl, plainOnly string
	dir                            string
}

// secureBrokers returns the secure broker the test command started. Like
// kafkatest.RealBrokers, a missing one fails the test: there is no skip.
func secureBrokers(t *testing.T) secureBroker {
	t.Helper()
	s := secureBroker{}
	for _, v := range []struct {
		env string
		dst *string
	}{{"KAFKA_SECURE_BROKERS", &s.plain}, {"KAFKA_SASL_SSL_BROKERS", &s.saslSSL}, {"KAFKA_SSL_BROKERS", &s.ssl}, {"KAFKA_PLAIN_ONLY_BROKERS", &s.plainOnly}, {"KAFKA_SECURE_DIR", &s.dir}} {
		*v.dst = os.Getenv(v.env)
		if *v.dst == "" {
			t.Fatalf("%s is not set: the secured-cluster tests need the broker that `make test` starts with `bash tests/kafka/kafka.sh start --secure` (tests/run.sh)", v.env)
		}
	}
	return s
}

func (s secureBroker) file(name string) string { return filepath.Join(s.dir, name) }

func (s secureBroker) password(t *testing.T, user string) string {
	b, err := os.ReadFile(s.file(user + ".password"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// secureConfig writes a one-pipeline config on brokers and loads it with
// the given environment and --set values (the kafka.tls and kafka.sasl
// keys).
func secureConfig(t *testing.T, brokers, group, in, out string, environ []string, sets ...string) (*config.Config, error) {
	return secureConfigWith(t, brokers, group, in, out, "", environ, sets...)
}

// secureConfigWith is secureConfig with pipelineKeys (YAML lines of the
// pipeline, indented by 4) added to the pipeline.
func secureConfigWith(t *testing.T, brokers, group, in, out, pipelineKeys string, environ []string, sets ...string) (*config.Config, error) {
	cfgPath := writeConfig(t, []string{brokers}, group, modules["uppercase"], in, out, out+"-dlq", "")
	if pipelineKeys != "" {
		replace(t, cfgPath, "    retry: {max_attempts: 1}\n", "    retry: {max_attempts: 1}\n"+pipelineKeys)
	}
	return config.Load(cfgPath, environ, sets)
}

// unsecuredJWT is a token the broker's unsecured OAUTHBEARER validator
// (test mode) accepts: alg none, no signature.
func unsecuredJWT(sub string, exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." +
		enc([]byte(fmt.Sprintf(`{"sub":%q,"iat":%d,"exp":%d}`, sub, time.Now().Add(-time.Minute).Unix(), exp.Unix()))) + "."
}

func writeSecret(t *testing.T, name, content string, mode os.FileMode) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSecurePipeline runs a pipeline end to end over SASL_SSL with
// SCRAM-SHA-512 (the password from the environment override) and over mTLS:
// every input's output arrives, offsets committed to the end. The pipeline
// is stateful and its changelog holds a record in each partition, so its
// start restores them through the restores' own clients, which must be
// secured as the pipeline's is (a plaintext one fails the restore, and the
// pipeline with it).
func TestSecurePipeline(t *testing.T) {
	s := secureBrokers(t)
	cases := []struct {
		name    string
		brokers string
		environ []string
		sets    []string
	}{
		{"scram-sha-512", s.saslSSL, []string{"WASMSTREAM_KAFKA_SASL_PASSWORD=" + s.password(t, "admin")},
			[]string{"kafka.tls.enabled=true", "kafka.tls.ca_file=" + s.file("ca.pem"), "kafka.sasl.mechanism=SCRAM-SHA-512", "kafka.sasl.username=admin"}},
		{"mtls", s.ssl, nil,
			[]string{"kafka.tls.enabled=true", "kafka.tls.ca_file=" + s.file("ca.pem"), "kafka.tls.cert_file=" + s.file("client.pem"), "kafka.tls.key_file=" + s.file("client.key")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plain := []string{s.plain}
			n := names(t)
			in, out, changelog := n+"-in", n+"-out", n+"-changelog"
			kafkatest.CreateTopic(t, plain, 2, in, out, out+"-dlq", changelog)
			const count = 2000
			kafkatest.Produce(t, plain, in, count, func(i int) string { return fmt.Sprintf("v-%05d", i) })
			pc := kafkatest.Client(t, plain, kgo.RecordPartitioner(kgo.ManualPartitioner()))
			for part := range int32(2) {
				if err := pc.ProduceSync(context.Background(), &kgo.Record{Topic: changelog, Partition: part, Key: []byte("k"), Value: []byte("1")}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			state := fmt.Sprintf("    state: {enabled: true, dir: %q, changelog: %s}\n", t.TempDir(), changelog)
			cfg, err := secureConfigWith(t, c.brokers, n, in, out, state, c.environ, c.sets...)
			if err != nil {
				t.Fatal(err)
			}
			r, err := scheduler.NewRunner(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			r.Start()
			ctx, cancel := ctxTimeout(time.Minute)
			defer cancel()
			defer r.Stop(ctx)
			rd := kafkatest.NewReader(t, plain, out)
			rd.ReadUntil(t, 2*time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= count })
			seen := map[string]bool{}
			for _, rec := range rd.Recs {
				if v := string(rec.Value); !strings.HasPrefix(v, "V-") || seen[v] {
					t.Fatalf("bad or duplicate output %q", v)
				} else {
					seen[v] = true
				}
			}
			group := cfg.GroupID(&cfg.Pipelines[0])
			kafkatest.Eventually(t, 30*time.Second, "offsets committed to the end", func() bool {
				return committedSum(t, plain, group, in) == count
			})
			if got := r.Pipelines()[0].Snapshot().StateRestored; got != 2 {
				t.Fatalf("%d changelog records restored, want the 2 the changelog holds", got)
			}
		})
	}
}

// TestSecureMechanisms connects with PLAIN, SCRAM-SHA-256 and OAUTHBEARER
// (an unsecured token read from token_file) and round-trips a record.
func TestSecureMechanisms(t *testing.T) {
	s := secureBrokers(t)
	tls := []string{"kafka.tls.enabled=true", "kafka.tls.ca_file=" + s.file("ca.pem")}
	cases := []struct {
		name string
		sets []string
	}{
		{"plain", []string{"kafka.sasl.mechanism=PLAIN", "kafka.sasl.username=plainuser", "kafka.sasl.password_file=" + s.file("plainuser.password")}},
		{"scram-sha-256", []string{"kafka.sasl.mechanism=SCRAM-SHA-256", "kafka.sasl.username=scram256", "kafka.sasl.password_file=" + s.file("scram256.password")}},
		{"oauthbearer", []string{"kafka.sasl.mechanism=OAUTHBEARER", "kafka.sasl.token_file=" + writeSecret(t, "token", unsecuredJWT("oauthuser", time.Now().Add(time.Hour)), 0o600)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := names(t)
			kafkatest.CreateTopic(t, []string{s.plain}, 1, n)
			cfg, err := secureConfig(t, s.saslSSL, n, n, n+"-out", nil, append(tls, c.sets...)...)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := kafkaconn.NewClient(cfg.Kafka, cfg.Kafka.Brokers, kgo.ConsumeTopics(n))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := ctxTimeout(time.Minute)
			defer cancel()
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: n, Value: []byte(c.name)}).FirstErr(); err != nil {
				t.Fatalf("produce over %s: %v", c.name, kafkaconn.Explain(cfg.Kafka, err))
			}
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatalf("fetch over %s: %v", c.name, err)
			}
			if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != c.name {
				t.Fatalf("read back %d records", len(recs))
			}
		})
	}
}

// TestSecureBadInput: each mistake a user makes connecting to a secured
// cluster stops the host at start, quickly, with an error naming the
// mistake in the user's words, and no secret in it.
func TestSecureBadInput(t *testing.T) {
	s := secureBrokers(t)
	adminPW := s.password(t, "admin")
	ca := "kafka.tls.ca_file=" + s.file("ca.pem")
	scram := []string{"kafka.sasl.mechanism=SCRAM-SHA-512", "kafka.sasl.username=admin"}
	pwFile := writeSecret(t, "pw", adminPW, 0o600)
	otherCA := writeOtherCA(t)
	cases := []struct {
		name    string
		brokers string
		environ []string
		sets    []string
		want    []string // substrings of the error
	}{
		{"wrong CA", s.saslSSL, nil, append([]string{"kafka.tls.enabled=true", "kafka.tls.ca_file=" + otherCA, "kafka.sasl.password_file=" + pwFile}, scram...),
			[]string{"is not trusted", "the CA file " + otherCA, `subject "CN=localhost", issued by "CN=wasmstream-test-ca"`}},
		{"system roots", s.saslSSL, nil, append([]string{"kafka.tls.enabled=true", "kafka.sasl.password_file=" + pwFile}, scram...),
			[]string{"is not trusted", "the system roots"}},
		{"wrong server name", s.saslSSL, nil, append([]string{"kafka.tls.enabled=true", ca, "kafka.tls.server_name=kafka.example.com", "kafka.sasl.password_file=" + pwFile}, scram...),
			[]string{`not valid for the name "kafka.example.com"`, "127.0.0.1", "kafka.tls.server_name"}},
		{"wrong password", s.saslSSL, []string{"WASMSTREAM_KAFKA_SASL_PASSWORD=not-the-password"}, append([]string{"kafka.tls.enabled=true", ca}, scram...),
			[]string{`refused the credentials of user "admin"`, "SCRAM-SHA-512"}},
		{"mechanism not enabled", s.plainOnly, nil, append([]string{"kafka.tls.enabled=true", ca, "kafka.sasl.password_file=" + pwFile}, scram...),
			[]string{"does not enable kafka.sasl.mechanism SCRAM-SHA-512", "it offers PLAIN;"}},
		{"TLS to a plaintext port", s.plain, nil, []string{"kafka.tls.enabled=true", ca},
			[]string{"during the TLS handshake", "PLAINTEXT", s.plain}},
		{"plaintext to a TLS port", s.saslSSL, nil, []string{},
			[]string{"kafka.tls.enabled: true", s.saslSSL}},
		{"no client certificate", s.ssl, nil, []string{"kafka.tls.enabled=true", ca},
			[]string{"client certificate", "kafka.tls.cert_file"}},
		{"expired OAuth token", s.saslSSL, nil, []string{"kafka.tls.enabled=true", ca, "kafka.sasl.mechanism=OAUTHBEARER",
			"kafka.sasl.token_file=" + writeSecret(t, "old-token", unsecuredJWT("oauthuser", time.Now().Add(-time.Hour)), 0o600)},
			[]string{"kafka.sasl.token_file", "expired at"}},
		{"missing password file", s.saslSSL, nil, append([]string{"kafka.tls.enabled=true", ca, "kafka.sasl.password_file=/nonexistent/kafka-password"}, scram...),
			[]string{"kafka.sasl.password_file", "/nonexistent/kafka-password", "no such file"}},
		{"unreadable key", s.ssl, nil, []string{"kafka.tls.enabled=true", ca, "kafka.tls.cert_file=" + s.file("client.pem"),
			"kafka.tls.key_file=" + writeSecret(t, "bad.key", "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n", 0o600)},
			[]string{"kafka.tls.key_file", "cannot use"}},
		{"insecure password file", s.saslSSL, nil, append([]string{"kafka.tls.enabled=true", ca, "kafka.sasl.password_file=" + writeSecret(t, "open-pw", adminPW, 0o644)}, scram...),
			[]string{"kafka.sasl.password_file", "accessible by group or others", "chmod 600"}},
		{"insecure key file", s.ssl, nil, []string{"kafka.tls.enabled=true", ca, "kafka.tls.cert_file=" + s.file("client.pem"),
			"kafka.tls.key_file=" + otherGroup(t, copyMode(t, s.file("client.key"), 0o640))},
			[]string{"kafka.tls.key_file", "accessible by group or others"}},
		{"unknown mechanism", s.saslSSL, nil, []string{"kafka.tls.enabled=true", ca, "kafka.sasl.mechanism=GSSAPI", "kafka.sasl.username=admin"},
			[]string{"kafka.sasl.mechanism", `"GSSAPI" is not a SASL mechanism`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := names(t)
			start := time.Now()
			cfg, err := secureConfig(t, c.brokers, n, n+"-in", n+"-out", c.environ, c.sets...)
			if err == nil {
				var r *scheduler.Runner
				r, err = scheduler.NewRunner(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
				if err == nil {
					ctx, cancel := ctxTimeout(10 * time.Second)
					r.Stop(ctx)
					cancel()
					t.Fatal("the host started")
				}
			}
			took := time.Since(start)
			msg := err.Error()
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%s", w, msg)
				}
			}
			if strings.Contains(msg, adminPW) {
				t.Errorf("error holds the password:\n%s", msg)
			}
			if took > 20*time.Second {
				t.Errorf("took %s to fail: want a prompt error, not a hang", took)
			}
			t.Logf("%s (%s)", msg, took.Round(time.Millisecond))
		})
	}
}

// writeOtherCA writes a CA certificate that signed nothing the broker has.
func writeOtherCA(t *testing.T) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "some-other-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return writeSecret(t, "other-ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), 0o644)
}

// copyMode copies src to a temporary file of mode mode.
// otherGroup gives the file at path a group the host is not in: group
// read is refused then (it is accepted on a root-owned file of the host's
// own group, as a Kubernetes Secret volume under fsGroup gives). Not
// root, the file is the user's own and its group bit refused already.
func otherGroup(t *testing.T, path string) string {
	if err := os.Chown(path, os.Getuid(), 54321); err != nil && os.Geteuid() == 0 {
		t.Fatal(err)
	}
	return path
}

func copyMode(t *testing.T, src string, mode os.FileMode) string {
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	return writeSecret(t, filepath.Base(src), string(b), mode)
}
