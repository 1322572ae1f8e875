package kafkaconn

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// silent is an address that accepts TCP connections and never answers (a
// load balancer with no backend): what it reads is dropped, the
// connections stay open until the test ends.
func silent(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	go func() { // ends when the listener closes
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	return l.Addr().String()
}

// TestTLSHandshakeDeadline: a broker address that accepts TCP and never
// answers the ClientHello fails the dial within dialTimeout, naming the
// address and the TLS handshake; a client on it logs that and goes on
// trying (it is a timeout), instead of hanging in the handshake.
func TestTLSHandshakeDeadline(t *testing.T) {
	old := dialTimeout
	dialTimeout = 300 * time.Millisecond
	defer func() { dialTimeout = old }()
	addr := silent(t)
	k := config.Kafka{Brokers: []string{addr}, TLS: config.KafkaTLS{Enabled: true}}
	tc, err := tlsConfig(k.TLS)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		err error
		d   time.Duration
	}
	res := make(chan result, 1)
	go func() {
		start := time.Now()
		c, err := dialer(tc, k.TLS)(context.Background(), "tcp", addr)
		if c != nil {
			c.Close()
		}
		res <- result{err, time.Since(start)}
	}()
	select {
	case r := <-res:
		want := "TLS handshake with the broker at " + addr + ": no answer within 300ms of connecting"
		if r.err == nil || !strings.Contains(r.err.Error(), want) || !errors.Is(r.err, context.DeadlineExceeded) {
			t.Fatalf("after %s: %v; want %q", r.d, r.err, want)
		}
		if r.d > 2*time.Second {
			t.Fatalf("the dial failed after %s, want about 300ms", r.d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the TLS handshake with a silent broker still runs after 5s")
	}

	// A client of it logs each failed connection with the address and
	// the phase, and a request fails with it once the caller gives up.
	var mu sync.Mutex
	var lines []string
	logger := kgo.BasicLogger(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, string(p))
		return len(p), nil
	}), kgo.LogLevelWarn, nil)
	cl, err := NewClient(k, k.Brokers, kgo.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	_, err = cl.Request(ctx, kmsg.NewPtrMetadataRequest())
	if err == nil {
		t.Fatal("a metadata request to a silent broker succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	logged := strings.Join(lines, "")
	if !strings.Contains(logged, "unable to open connection to broker") || !strings.Contains(logged, "TLS handshake with the broker at "+addr+": no answer within 300ms") {
		t.Fatalf("after %s (%v), the client logged:\n%s", time.Since(start), err, logged)
	}
	// The request gave up at its deadline; explained, it says why (a
	// client without a logger, as the host's start uses, shows it so).
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the request: %v", err)
	}
	if e := Explain(k, err); !strings.Contains(e.Error(), "(the last connection to a broker failed: TLS handshake with the broker at "+addr+": no answer within 300ms") {
		t.Fatalf("explained: %v", e)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestOAuthWithoutTLSWarns: an OAuth token sent without TLS is warned of
// as a PLAIN password is.
func TestOAuthWithoutTLSWarns(t *testing.T) {
	w := Warnings(config.Kafka{SASL: config.KafkaSASL{Mechanism: "OAUTHBEARER", TokenFile: "/t"}})
	if len(w) != 1 || !strings.Contains(w[0], "kafka.sasl.mechanism is OAUTHBEARER without kafka.tls.enabled: the token crosses the network in clear text") {
		t.Fatalf("%q", w)
	}
	if w := Warnings(config.Kafka{TLS: config.KafkaTLS{Enabled: true}, SASL: config.KafkaSASL{Mechanism: "OAUTHBEARER", TokenFile: "/t"}}); len(w) != 0 {
		t.Fatalf("over TLS: %q", w)
	}
	if w := Warnings(config.Kafka{SASL: config.KafkaSASL{Mechanism: "SCRAM-SHA-512"}}); len(w) != 0 {
		t.Fatalf("SCRAM sends no password: %q", w)
	}
}

// TestSecretFilesThatArePipes: a password or token file that is a named
// pipe, at start or put in place of the file while the host runs, fails
// the start or the authentication at once, naming the key, instead of
// blocking every new connection.
func TestSecretFilesThatArePipes(t *testing.T) {
	dir := t.TempDir()
	fifo := func(name string) string {
		p := filepath.Join(dir, name)
		os.Remove(p)
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	quick := func(what string, f func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			return err
		case <-time.After(3 * time.Second):
			t.Fatalf("%s: still blocked after 3s", what)
			return nil
		}
	}
	enc := base64.RawURLEncoding.EncodeToString
	jwt := enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(fmt.Sprintf(`{"sub":"a","exp":%d}`, time.Now().Add(time.Hour).Unix()))) + "."
	for _, tc := range []struct {
		key     string
		sasl    func(path string) config.KafkaSASL
		content string
	}{
		{"kafka.sasl.password_file", func(p string) config.KafkaSASL {
			return config.KafkaSASL{Mechanism: "SCRAM-SHA-512", Username: "u", PasswordFile: p}
		}, "pw"},
		{"kafka.sasl.token_file", func(p string) config.KafkaSASL {
			return config.KafkaSASL{Mechanism: "OAUTHBEARER", TokenFile: p}
		}, jwt},
	} {
		// At start.
		p := fifo("start-" + tc.key)
		err := quick(tc.key+" at start", func() error { _, err := mechanism(tc.sasl(p)); return err })
		if err == nil || !strings.Contains(err.Error(), tc.key+": "+p+" is not a regular file (a named pipe)") {
			t.Errorf("%s a pipe at start: %v", tc.key, err)
		}
		// Replaced while running: the next authentication.
		p = filepath.Join(dir, "run-"+tc.key)
		os.WriteFile(p, []byte(tc.content), 0o600)
		m, err := mechanism(tc.sasl(p))
		if err != nil {
			t.Fatal(err)
		}
		fifo("run-" + tc.key)
		err = quick(tc.key+" at authentication", func() error {
			_, _, err := m.Authenticate(context.Background(), "b:9092")
			return err
		})
		if err == nil || !strings.Contains(err.Error(), tc.key+": "+p+" is not a regular file (a named pipe)") {
			t.Errorf("%s replaced by a pipe: %v", tc.key, err)
		}
	}
	// The client's private key.
	p := fifo("key")
	cert := filepath.Join(dir, "cert")
	os.WriteFile(cert, []byte("x"), 0o644)
	err := quick("kafka.tls.key_file", func() error {
		_, err := tlsConfig(config.KafkaTLS{Enabled: true, CertFile: cert, KeyFile: p})
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "kafka.tls.key_file: "+p+" is not a regular file (a named pipe)") {
		t.Errorf("a key that is a pipe: %v", err)
	}
}
