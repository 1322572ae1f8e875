// Package tlsfiles reads the files of a TLS client — the CA that signs the
// servers' certificates, the client's own certificate and key — under one
// rule for every connection wasmstream makes (kafka.tls,
// schema_registry.tls), and names in the user's words the certificate a
// failed handshake met. Every error names the config key of its file under
// the prefix its caller gives, so the brokers' and the registry's errors
// each point at their own section.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/wasmstream/wasmstream/internal/secretfile"
)

// MaxPEMBytes bounds a CA, certificate or key file read: a path given by
// mistake (a log, a device) is refused, not read whole.
const MaxPEMBytes = 1 << 20

// Files are the settings of one TLS client section.
type Files struct {
	// CAFile holds PEM certificates that replace the system roots.
	CAFile string
	// CertFile and KeyFile are the client's certificate and its key (a
	// secret file: internal/secretfile's rule).
	CertFile, KeyFile  string
	ServerName         string
	InsecureSkipVerify bool
}

// Config is a client's TLS config read from its Files, and what its errors
// name.
type Config struct {
	TLS *tls.Config
	// Trust names what the servers' certificates are verified against
	// ("the CA file /etc/kafka/ca.pem" or "the system roots").
	Trust string
	// Client says whether a client certificate is given.
	Client bool
}

// Load reads the files of f. key is the section its errors name
// ("kafka.tls": "kafka.tls.ca_file: ..."). TLS 1.2 is the least version
// taken.
func Load(f Files, key string) (*Config, error) {
	c := &Config{TLS: &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName, InsecureSkipVerify: f.InsecureSkipVerify}, Trust: "the system roots"}
	if f.CAFile != "" {
		pem, err := readPEM(f.CAFile, key+".ca_file")
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s.ca_file: %s holds no PEM certificate", key, f.CAFile)
		}
		c.TLS.RootCAs = pool
		c.Trust = "the CA file " + f.CAFile
	}
	if f.CertFile != "" || f.KeyFile != "" {
		cert, err := readPEM(f.CertFile, key+".cert_file")
		if err != nil {
			return nil, err
		}
		pk, err := secretfile.Read(f.KeyFile, key+".key_file", "the client's private key", MaxPEMBytes)
		if err != nil {
			return nil, err
		}
		pair, err := tls.X509KeyPair(cert, pk)
		if err != nil {
			// X509KeyPair's errors name no key material.
			return nil, fmt.Errorf("%s.key_file: cannot use %s with %s: %v (want PEM: a certificate, and an unencrypted PKCS#1, PKCS#8 or EC private key that matches it)", key, f.KeyFile, f.CertFile, err)
		}
		c.TLS.Certificates = []tls.Certificate{pair}
		c.Client = true
	}
	return c, nil
}

// readPEM reads a file that is not secret, at most MaxPEMBytes of it.
func readPEM(path, key string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxPEMBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if len(b) > MaxPEMBytes {
		return nil, fmt.Errorf("%s: %s is larger than %d bytes: not a PEM certificate file", key, path, MaxPEMBytes)
	}
	return b, nil
}

// Untrusted reports whether err is a certificate signed by no CA the
// client trusts, and gives the server's own certificate (not the top of
// the chain it sent, which x509 names).
func Untrusted(err error) (*x509.Certificate, bool) {
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		return nil, false
	}
	leaf := unknown.Cert
	var cve *tls.CertificateVerificationError
	if errors.As(err, &cve) && len(cve.UnverifiedCertificates) > 0 {
		leaf = cve.UnverifiedCertificates[0]
	}
	return leaf, true
}

// Describe names a certificate by its subject and issuer.
func Describe(c *x509.Certificate) string {
	if c == nil {
		return "no certificate"
	}
	return fmt.Sprintf("subject %q, issued by %q", c.Subject.String(), c.Issuer.String())
}

// Names lists the names a certificate is valid for.
func Names(c *x509.Certificate) string {
	if c == nil {
		return "no names"
	}
	var n []string
	n = append(n, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		n = append(n, ip.String())
	}
	if len(n) == 0 {
		return "no subject alternative names, only the subject " + c.Subject.String()
	}
	return strings.Join(n, ", ")
}
