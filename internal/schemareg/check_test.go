package schemareg

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/tlsfiles/tlstest"
)

// typesHandler answers GET /schemas/types as a registry does, behind
// basic auth of user u when password is not empty.
func typesHandler(password string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if password != "" {
			if u, p, ok := r.BasicAuth(); !ok || u != "u" || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
				http.Error(w, `{"error_code":401,"message":"Unauthorized"}`, http.StatusUnauthorized)
				return
			}
		}
		if r.URL.Path != "/schemas/types" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		w.Write([]byte(`["AVRO","PROTOBUF","JSON"]`))
	}
}

// checkWithin runs Check on a client of cfg and fails the test when it
// takes longer than d: a refusal must be fast, a silence bounded.
func checkWithin(t *testing.T, cfg Config, d time.Duration) error {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	start := time.Now()
	err = c.Check(context.Background())
	if took := time.Since(start); took > d {
		t.Errorf("Check took %s, want at most %s (%v)", took, d, err)
	}
	return err
}

func wantKind(t *testing.T, err error, kind Kind, says ...string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Kind != kind {
		t.Fatalf("%v: want a %s error", err, kind)
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error does not say %q: %v", s, err)
		}
	}
}

// TestCheckPrivateCA: a registry whose certificate a private CA signed
// (made here with crypto/x509) is checked with schema_registry.tls.ca_file
// set to that CA; without it the check fails at once naming
// schema_registry.tls.ca_file, the certificate and the unknown authority;
// by a name the certificate does not carry it names
// schema_registry.tls.server_name; an https URL to an http registry says
// so; a registry that wants a client certificate names cert_file and
// key_file, and takes one its CA signed; and the CA file is read with the rules of kafka.tls, its errors
// naming schema_registry.tls keys.
func TestCheckPrivateCA(t *testing.T) {
	t.Parallel() // servers of its own; its bounds are generous
	ca, err := tlstest.NewCA("registry-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Server("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := leaf.TLS()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(typesHandler(""))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the test
	srv.StartTLS()
	defer srv.Close()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}

	if err := checkWithin(t, Config{URL: srv.URL, TLS: TLS{CAFile: caFile}}, 5*time.Second); err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	err = checkWithin(t, Config{URL: srv.URL}, 5*time.Second)
	wantKind(t, err, Unavailable, "schema_registry.tls.ca_file", "unknown authority", "not trusted", "the system roots", `subject "CN=127.0.0.1", issued by "CN=registry-test-ca"`)

	other, err := tlstest.NewCA("another-ca")
	if err != nil {
		t.Fatal(err)
	}
	otherFile := filepath.Join(dir, "other.pem")
	if err := os.WriteFile(otherFile, other.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	err = checkWithin(t, Config{URL: srv.URL, TLS: TLS{CAFile: otherFile}}, 5*time.Second)
	wantKind(t, err, Unavailable, "schema_registry.tls.ca_file", "unknown authority", "the CA file "+otherFile)

	byName := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	err = checkWithin(t, Config{URL: byName, TLS: TLS{CAFile: caFile}}, 5*time.Second)
	wantKind(t, err, Unavailable, "schema_registry.tls.server_name", `"localhost"`, "it names 127.0.0.1")
	if err := checkWithin(t, Config{URL: byName, TLS: TLS{CAFile: caFile, ServerName: "127.0.0.1"}}, 5*time.Second); err != nil {
		t.Errorf("with server_name: %v", err)
	}

	plain := httptest.NewServer(typesHandler(""))
	defer plain.Close()
	err = checkWithin(t, Config{URL: strings.Replace(plain.URL, "http://", "https://", 1), TLS: TLS{CAFile: caFile}}, 5*time.Second)
	wantKind(t, err, Unavailable, "answered without TLS")

	// A registry that wants a client certificate (mTLS): refused without
	// one, naming cert_file and key_file; taken with one its CA signed.
	mtls := httptest.NewUnstartedServer(typesHandler(""))
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	mtls.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	mtls.Config.ErrorLog = log.New(io.Discard, "", 0)
	mtls.StartTLS()
	defer mtls.Close()
	err = checkWithin(t, Config{URL: mtls.URL, TLS: TLS{CAFile: caFile}}, 5*time.Second)
	wantKind(t, err, Unavailable, "refused the TLS handshake", "set schema_registry.tls.cert_file and schema_registry.tls.key_file")
	client, err := ca.Client("wasmstream")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	if err := os.WriteFile(certFile, client.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, client.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkWithin(t, Config{URL: mtls.URL, TLS: TLS{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}}, 5*time.Second); err != nil {
		t.Errorf("with the client certificate: %v", err)
	}
	stranger, err := other.Client("stranger")
	if err != nil {
		t.Fatal(err)
	}
	strangerCert, strangerKey := filepath.Join(dir, "stranger.pem"), filepath.Join(dir, "stranger-key.pem")
	if err := os.WriteFile(strangerCert, stranger.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(strangerKey, stranger.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	err = checkWithin(t, Config{URL: mtls.URL, TLS: TLS{CAFile: caFile, CertFile: strangerCert, KeyFile: strangerKey}}, 5*time.Second)
	wantKind(t, err, Unavailable, "refused the TLS handshake", "is the client certificate (schema_registry.tls.cert_file) signed by a CA the registry trusts?")

	big := filepath.Join(dir, "big.pem")
	if err := os.WriteFile(big, make([]byte, 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		filepath.Join(dir, "none.pem"): "schema_registry.tls.ca_file: open",
		big:                            "schema_registry.tls.ca_file: " + big + " is larger than",
	} {
		if _, err := New(Config{URL: srv.URL, TLS: TLS{CAFile: file}}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ca_file %s: %v, want %q", file, err, want)
		}
	}
	if _, err := New(Config{URL: srv.URL, TLS: TLS{CertFile: caFile, KeyFile: filepath.Join(dir, "none.key")}}); err == nil || !strings.Contains(err.Error(), "schema_registry.tls.key_file") {
		t.Errorf("a missing key file: %v", err)
	}
}

// TestCheckCredentials: a registry behind basic auth refuses a wrong
// password with HTTP 401: the check fails at once naming
// schema_registry.basic_auth, the user and the status, never the
// password; no credentials at all are named as missing; the right ones
// pass; a 403 (credentials taken, that question not granted) and a 404 (a
// registry without the endpoint) pass, as the connection and the
// credentials are what is checked.
func TestCheckCredentials(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(typesHandler("s3cret"))
	defer srv.Close()
	err := checkWithin(t, Config{URL: srv.URL, Username: "u", Password: "wrong-pw"}, 5*time.Second)
	wantKind(t, err, Refused, "schema_registry.basic_auth", `user "u"`, "HTTP 401", "wrong username or password")
	if strings.Contains(err.Error(), "wrong-pw") {
		t.Errorf("the error shows the password: %v", err)
	}
	err = checkWithin(t, Config{URL: srv.URL}, 5*time.Second)
	wantKind(t, err, Refused, "HTTP 401", "none are set", "schema_registry.basic_auth or schema_registry.token_file")
	if err := checkWithin(t, Config{URL: srv.URL, Username: "u", Password: "s3cret"}, 5*time.Second); err != nil {
		t.Errorf("the right password: %v", err)
	}
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("expired-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = checkWithin(t, Config{URL: srv.URL, TokenFile: tok}, 5*time.Second)
	wantKind(t, err, Refused, "HTTP 401", "schema_registry.token_file", "a wrong or expired token")
	if strings.Contains(err.Error(), "expired-token") {
		t.Errorf("the error shows the token: %v", err)
	}

	for _, status := range []int{http.StatusForbidden, http.StatusNotFound} {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error_code":1,"message":"no"}`, status)
		}))
		if err := checkWithin(t, Config{URL: s.URL, Username: "u", Password: "p"}, 5*time.Second); err != nil {
			t.Errorf("HTTP %d: %v, want the check passed", status, err)
		}
		s.Close()
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer s.Close()
	err = checkWithin(t, Config{URL: s.URL}, 5*time.Second)
	wantKind(t, err, Unavailable, "HTTP 503")
}

// silentListener accepts connections and never reads or answers them
// until the test ends: a registry host whose process hangs.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var conns []net.Conn
	go func() { // ends when l is closed
		for {
			c, err := l.Accept()
			if err != nil {
				close(done)
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// TestCheckNeverAnswers: a registry that takes the connection and never
// answers — over http, or over https where even the TLS handshake gets no
// answer — fails the check within schema_registry.request_timeout, naming
// it, not a hang.
func TestCheckNeverAnswers(t *testing.T) {
	t.Parallel()
	addr := silentListener(t)
	for _, url := range []string{"http://" + addr, "https://" + addr} {
		err := checkWithin(t, Config{URL: url, RequestTimeout: 300 * time.Millisecond}, 3*time.Second)
		wantKind(t, err, Unavailable, "no answer within 300ms (schema_registry.request_timeout)")
	}
	// The caller's deadline bounds it too.
	c, err := New(Config{URL: "http://" + addr, RequestTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = c.Check(ctx)
	if time.Since(start) > 3*time.Second {
		t.Errorf("took %s", time.Since(start))
	}
	wantKind(t, err, Unavailable, "context deadline exceeded before it answered")
	if strings.Contains(err.Error(), "request_timeout") {
		t.Errorf("blames request_timeout for the caller's deadline: %v", err)
	}
}
