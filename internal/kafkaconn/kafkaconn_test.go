package kafkaconn

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/config"
)

func TestJWTExpiry(t *testing.T) {
	enc := base64.RawURLEncoding.EncodeToString
	exp := time.Unix(1700000000, 0)
	tok := enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(fmt.Sprintf(`{"sub":"a","exp":%d}`, exp.Unix()))) + "."
	if got, ok := jwtExpiry(tok); !ok || !got.Equal(exp) {
		t.Fatalf("jwtExpiry = %v %v", got, ok)
	}
	for _, opaque := range []string{"opaque-token", "a.b.c", enc([]byte(`{}`)) + "." + enc([]byte(`{"sub":"a"}`)) + "."} {
		if _, ok := jwtExpiry(opaque); ok {
			t.Fatalf("%q has no expiry", opaque)
		}
	}
}

// TestAWSCredentials: the environment first, then the shared credentials
// file's profile, refused if others may read it; the region fallback.
func TestAWSCredentials(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	os.WriteFile(creds, []byte("[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = s1\n[ci]\naws_access_key_id=AKIDCI\naws_secret_access_key=s2\naws_session_token=tok\n"), 0o600)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_PROFILE", "ci")
	a, err := awsCredentials()
	if err != nil || a.AccessKey != "AKIDCI" || a.SecretKey != "s2" || a.SessionToken != "tok" {
		t.Fatalf("profile ci: %+v %v", a.AccessKey, err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s3")
	if a, err := awsCredentials(); err != nil || a.AccessKey != "AKIDENV" {
		t.Fatalf("environment: %+v %v", a.AccessKey, err)
	}
	if _, err := Opts(config.Kafka{Brokers: []string{"b:9098"}, TLS: config.KafkaTLS{Enabled: true}, SASL: config.KafkaSASL{Mechanism: "AWS_MSK_IAM", Region: "eu-west-1"}}, []string{"b:9098"}); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("AWS_REGION") != "eu-west-1" {
		t.Fatalf("kafka.sasl.region not given as the fallback region")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	os.Chmod(creds, 0o644)
	if _, err := awsCredentials(); err == nil || !strings.Contains(err.Error(), "accessible by group or others") {
		t.Fatalf("a credentials file others may read: %v", err)
	}
}

func TestWarnings(t *testing.T) {
	w := Warnings(config.Kafka{TLS: config.KafkaTLS{Enabled: true, InsecureSkipVerify: true}})
	if len(w) != 1 || !strings.Contains(w[0], "insecure_skip_verify") {
		t.Fatalf("%q", w)
	}
	if w := Warnings(config.Kafka{TLS: config.KafkaTLS{Enabled: true, CAFile: "/ca.pem"}}); len(w) != 0 {
		t.Fatalf("%q", w)
	}
}

// serve answers the first connection to a listener with reply.
func serve(t *testing.T, reply []byte) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Read(make([]byte, 512))
		c.Write(reply)
		time.Sleep(100 * time.Millisecond)
	}()
	return l.Addr().String()
}

// TestMismatchedListeners: TLS to a listener answering in plaintext, and
// plaintext to one answering with a TLS alert, are each named.
func TestMismatchedListeners(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A Kafka response: size, correlation id.
	addr := serve(t, []byte{0, 0, 0, 4, 0, 0, 0, 1})
	tc, _ := tlsConfig(config.KafkaTLS{Enabled: true})
	_, err := dialer(tc, config.KafkaTLS{Enabled: true})(ctx, "tcp", addr)
	if err == nil || !strings.Contains(err.Error(), "answered without TLS") {
		t.Fatalf("TLS to plaintext: %v", err)
	}
	// A TLS alert record (protocol version).
	addr = serve(t, []byte{21, 3, 3, 0, 2, 2, 70})
	c, err := dialer(nil, config.KafkaTLS{})(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{0, 0, 0, 1, 0})
	_, err = c.Read(make([]byte, 4))
	if err == nil || !strings.Contains(err.Error(), "answered with TLS") {
		t.Fatalf("plaintext to TLS: %v", err)
	}
}

// TestSecretsReadAtEachAuthentication: a token or password file replaced
// while the host runs is sent by the next authentication; an expired JWT
// is refused by the host itself, naming the file.
func TestSecretsReadAtEachAuthentication(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	enc := base64.RawURLEncoding.EncodeToString
	jwt := func(sub string, exp time.Time) string {
		return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(fmt.Sprintf(`{"sub":%q,"exp":%d}`, sub, exp.Unix()))) + "."
	}
	os.WriteFile(tok, []byte(jwt("first", time.Now().Add(time.Hour))), 0o600)
	m, err := mechanism(config.KafkaSASL{Mechanism: "OAUTHBEARER", TokenFile: tok})
	if err != nil {
		t.Fatal(err)
	}
	first := func() string {
		_, msg, err := m.Authenticate(context.Background(), "b:9092")
		if err != nil {
			return "error: " + err.Error()
		}
		return string(msg)
	}
	if !strings.Contains(first(), jwt("first", time.Now().Add(time.Hour))[:20]) {
		t.Fatal("first token not sent")
	}
	second := jwt("second", time.Now().Add(time.Hour))
	os.WriteFile(tok, []byte(second), 0o600)
	if !strings.Contains(first(), second) {
		t.Fatal("replaced token not sent")
	}
	os.WriteFile(tok, []byte(jwt("old", time.Now().Add(-time.Minute))), 0o600)
	if got := first(); !strings.Contains(got, "kafka.sasl.token_file: the OAuth token in "+tok+" expired at") {
		t.Fatalf("expired token: %s", got)
	}

	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("one\n"), 0o600)
	m, err = mechanism(config.KafkaSASL{Mechanism: "PLAIN", Username: "u", PasswordFile: pw})
	if err != nil {
		t.Fatal(err)
	}
	if got := first(); got != "\x00u\x00one" {
		t.Fatalf("PLAIN sent %q", got)
	}
	os.WriteFile(pw, []byte("two"), 0o600)
	if got := first(); got != "\x00u\x00two" {
		t.Fatalf("PLAIN after rotation sent %q", got)
	}
}
