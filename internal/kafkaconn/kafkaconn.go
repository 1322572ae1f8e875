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
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/wasmstream/wasmstream/scheduler/config"
)

// dialTimeout bounds a connection's opening: the TCP connect and the TLS
// handshake together, one deadline for both (as kgo's own dialer does by
// default). Without it on the handshake, an address that accepts TCP and
// never answers the ClientHello (a load balancer with no backend) would
// hold a dial, and a host's start, for ever. A variable for the tests.
var dialTimeout = 10 * time.Second

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
	if !k.TLS.Enabled && (k.SASL.Mechanism == "OAUTHBEARER") {
		// The token is a bearer credential: whoever reads it off the
		// wire can authenticate as the host until it expires.
		w = append(w, "kafka.sasl.mechanism is OAUTHBEARER without kafka.tls.enabled: the token crosses the network in clear text, and anyone who reads it can use it until it expires")
	}
	return w
}

// dialer connects over TCP, then over TLS when tc is set, both within
// dialTimeout; either way it names a listener of the other kind (dial.go).
func dialer(tc *tlsSettings, t config.KafkaTLS) func(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		limit := dialTimeout
		dctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		c, err := d.DialContext(dctx, network, addr)
		if err != nil {
			if ctx.Err() == nil {
				lastDial.set(err)
			}
			return nil, err
		}
		if tc == nil {
			return &plainConn{Conn: c, addr: addr}, nil
		}
		conn, err := tc.handshake(dctx, c, addr)
		if err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			// The deadline is the dial's own, not the caller's: the
			// broker accepted the connection and never finished the
			// handshake. Still a timeout (kgo retries it as one).
			err = &TLSError{Msg: fmt.Sprintf("TLS handshake with the broker at %s: no answer within %s of connecting (kafka.tls.enabled is true): is it a TLS listener, and is anything behind this address (a load balancer with no backend accepts and stays silent)?", addr, limit), Err: err}
		}
		if err != nil && ctx.Err() == nil {
			lastDial.set(err)
		}
		return conn, err
	}
}

// lastDial is the latest connection to a broker that could not be opened,
// for Explain: a request that gave up at its context's deadline says only
// "context deadline exceeded", while why the brokers could not be reached
// is in the dial's error (kgo logs it only with a logger, which not every
// client has).
var lastDial dialFailure

type dialFailure struct {
	mu  sync.Mutex
	err error
	at  time.Time
}

func (f *dialFailure) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.at = err, time.Now()
}

// since is the latest failure if it happened within d.
func (f *dialFailure) since(d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil || time.Since(f.at) > d {
		return nil
	}
	return f.err
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
