// Package kafkaconn is the one place that turns the kafka section of the
// config into the options every Kafka client of the process starts from:
// the seed brokers, the client id, the dialer (TLS or plaintext) and SASL.
// Pipelines, retry workers, state changelogs, the fleet registry, topic
// creation and the CLI commands all build their clients on Opts, so a
// secured cluster is reached the same way by each (RATIONALE.md, "Secured
// clusters").
//
// Secrets (passwords, tokens, private keys) are read from the config or the
// environment or from files readable by their owner only; they are never
// put in an error or a log line.
package kafkaconn

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/wasmstream/wasmstream/scheduler/config"
)

// dialTimeout bounds a TCP connect plus the TLS handshake, as kgo's own
// dialer does by default.
const dialTimeout = 10 * time.Second

// Opts returns the base options of a client of the brokers at brokers (the
// configured ones, or the embedded broker's addresses) under k: seeds,
// client id, dialer and SASL. It reads the files k names (CA, client
// certificate and key, password or token), so a missing file, an
// unreadable key or a secret file others may read is an error here, naming
// its key, before any connection is tried. Callers append their own
// options.
func Opts(k config.Kafka, brokers []string) ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID(k.ClientID)}
	tc, err := tlsConfig(k.TLS)
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.Dialer(dialer(tc, k.TLS)))
	mech, err := mechanism(k.SASL)
	if err != nil {
		return nil, err
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	return opts, nil
}

// Warnings are what a process connecting under k says at every start:
// settings that weaken the connection's security.
func Warnings(k config.Kafka) []string {
	var w []string
	if k.TLS.Enabled && k.TLS.InsecureSkipVerify {
		w = append(w, "kafka.tls.insecure_skip_verify is true: the brokers' certificates are not verified, so anyone on the network path can pose as the brokers and read every record and credential; for tests only")
	}
	if !k.TLS.Enabled && (k.SASL.Mechanism == "PLAIN") {
		w = append(w, "kafka.sasl.mechanism is PLAIN without kafka.tls.enabled: the password crosses the network in clear text")
	}
	return w
}

// dialer connects over TCP, then over TLS when tc is set; either way it
// names a listener of the other kind (dial.go).
func dialer(tc *tlsSettings, t config.KafkaTLS) func(ctx context.Context, network, host string) (net.Conn, error) {
	d := &net.Dialer{Timeout: dialTimeout}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if tc == nil {
			return &plainConn{Conn: c, addr: addr}, nil
		}
		return tc.handshake(ctx, c, addr)
	}
}

// mechanism is the SASL mechanism of s, or nil without one.
func mechanism(s config.KafkaSASL) (sasl.Mechanism, error) {
	switch s.Mechanism {
	case "":
		return nil, nil
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		return passwordMechanism(s)
	case "OAUTHBEARER":
		return oauthMechanism(s)
	case "AWS_MSK_IAM":
		return awsMechanism(s)
	}
	return nil, fmt.Errorf("kafka.sasl.mechanism: %q is not a SASL mechanism wasmstream knows: want one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM", s.Mechanism)
}

// NewClient is a client of the brokers at brokers under k: Opts, then more.
func NewClient(k config.Kafka, brokers []string, more ...kgo.Opt) (*kgo.Client, error) {
	opts, err := Opts(k, brokers)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, more...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka.brokers: %w", err)
	}
	return cl, nil
}
