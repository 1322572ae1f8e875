package kafkaconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	"github.com/wasmstream/wasmstream/internal/tlsfiles"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// tlsSettings is the TLS configuration of the connections, and what its
// errors name (the CA file, or the system roots; whether a client
// certificate is given).
type tlsSettings struct {
	cfg    *tls.Config
	trust  string
	client bool
}

// tlsConfig reads the files of t (internal/tlsfiles, errors naming
// kafka.tls.*); nil when TLS is off.
func tlsConfig(t config.KafkaTLS) (*tlsSettings, error) {
	if !t.Enabled {
		return nil, nil
	}
	c, err := tlsfiles.Load(tlsfiles.Files{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile,
		ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}, "kafka.tls")
	if err != nil {
		return nil, err
	}
	return &tlsSettings{cfg: c.TLS, trust: c.Trust, client: c.Client}, nil
}

// handshake runs the TLS handshake over c to the broker at addr and says
// in the user's words why it failed.
func (s *tlsSettings) handshake(ctx context.Context, c net.Conn, addr string) (net.Conn, error) {
	cfg := s.cfg
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg.ServerName = host
	}
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, s.explain(err, addr, cfg.ServerName)
	}
	return &tlsConn{Conn: tc, s: s, addr: addr, name: cfg.ServerName}, nil
}

// tlsConn explains an error of its first read: under TLS 1.3 the client's
// side of the handshake ends before the broker has checked the client's
// certificate, so a refused (or missing) certificate arrives as an alert
// on the first read.
type tlsConn struct {
	net.Conn
	s          *tlsSettings
	addr, name string
	once       sync.Once
}

func (c *tlsConn) Read(p []byte) (int, error) {
	first := false
	c.once.Do(func() { first = true })
	n, err := c.Conn.Read(p)
	if first && err != nil && n == 0 {
		return 0, c.s.explain(err, c.addr, c.name)
	}
	return n, err
}

// TLSError is a failed TLS handshake with a broker, said in the user's
// words; Unwrap gives the handshake's own error.
type TLSError struct {
	Msg string
	Err error
}

func (e *TLSError) Error() string { return e.Msg }
func (e *TLSError) Unwrap() error { return e.Err }

func (s *tlsSettings) explain(err error, addr, name string) error {
	wrap := func(format string, args ...any) error {
		return &TLSError{Msg: fmt.Sprintf(format, args...), Err: err}
	}
	var rec tls.RecordHeaderError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var alert tls.AlertError
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		// Not wrapped: kgo would take an EOF for its own guess at the cause.
		return &TLSError{Msg: fmt.Sprintf("the broker at %s closed the connection during the TLS handshake: a PLAINTEXT or SASL_PLAINTEXT listener does this to a TLS client; is it one? (kafka.tls.enabled is true: give the address of a TLS listener, or turn TLS off)", addr)}
	case errors.As(err, &rec):
		return wrap("the broker at %s answered without TLS; is this a PLAINTEXT or SASL_PLAINTEXT listener? (kafka.tls.enabled is true: give the address of a TLS listener, or turn TLS off)", addr)
	case isUntrusted(err):
		leaf, _ := tlsfiles.Untrusted(err)
		return wrap("the certificate of the broker at %s (%s) is not trusted: it is not signed by %s (kafka.tls.ca_file: give the CA that signed the brokers' certificates)", addr, tlsfiles.Describe(leaf), s.trust)
	case errors.As(err, &host):
		return wrap("the certificate of the broker at %s is not valid for the name %q (it names %s): connect by a name it carries, or set kafka.tls.server_name", addr, name, tlsfiles.Names(host.Certificate))
	case errors.As(err, &invalid):
		return wrap("the certificate of the broker at %s (%s) is not valid: %v", addr, tlsfiles.Describe(invalid.Cert), invalid)
	case errors.As(err, &alert) || strings.Contains(err.Error(), "remote error: tls:"):
		if !s.client {
			return wrap("the broker at %s refused the TLS handshake (%v): it may require a client certificate: set kafka.tls.cert_file and kafka.tls.key_file", addr, err)
		}
		return wrap("the broker at %s refused the TLS handshake (%v): is the client certificate (kafka.tls.cert_file) signed by a CA the broker trusts?", addr, err)
	}
	return wrap("TLS handshake with the broker at %s: %v", addr, err)
}

// isUntrusted: a certificate signed by no CA the client trusts.
func isUntrusted(err error) bool {
	_, ok := tlsfiles.Untrusted(err)
	return ok
}
