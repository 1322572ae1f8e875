package kafkaconn

import (
	"context"
	"encoding/base64"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/config"
)

// explained is Explain of the error a metadata request on k meets.
func explained(t *testing.T, k config.Kafka) error {
	t.Helper()
	opts, err := Opts(k, k.Brokers)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.RetryTimeout(2*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = kadm.NewClient(cl).ListTopics(ctx)
	if err == nil {
		t.Fatal("the request succeeded")
	}
	return Explain(k, err)
}

// TestWrongMechanismListsOffered: a mechanism the listener does not enable
// is refused with the mechanisms it offers (its SASLHandshake response
// lists them; franz-go's error does not).
func TestWrongMechanismListsOffered(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	enc := base64.RawURLEncoding.EncodeToString
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte(enc([]byte(`{"alg":"none"}`))+"."+enc([]byte(`{"sub":"admin"}`))+"."), 0o600); err != nil {
		t.Fatal(err)
	}
	k := config.Kafka{Brokers: c.ListenAddrs(), SASL: config.KafkaSASL{Mechanism: "OAUTHBEARER", TokenFile: tok}}
	err = explained(t, k)
	if want := "does not enable kafka.sasl.mechanism OAUTHBEARER (its sasl.enabled.mechanisms lacks it): it offers PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"; !strings.Contains(err.Error(), want) {
		t.Errorf("got %v\nwant %q", err, want)
	}
}

// TestSASLWithoutTLSToTLSListener: a listener that closes a plaintext
// connection at once (as a TLS one does) is named with the key to set,
// with SASL configured or not (franz-go's own text asks "is TLS missing?"
// without naming it).
func TestSASLWithoutTLSToTLSListener(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, s := range []config.KafkaSASL{{}, {Mechanism: "SCRAM-SHA-512", Username: "u", Password: "p"}} {
		err := explained(t, config.Kafka{Brokers: []string{l.Addr().String()}, SASL: s})
		if !strings.Contains(err.Error(), "set kafka.tls.enabled: true") || s.Mechanism != "" && !strings.Contains(err.Error(), "kafka.sasl.mechanism is SCRAM-SHA-512, kafka.tls.enabled is false") {
			t.Errorf("kafka.sasl.mechanism %q without TLS: %v", s.Mechanism, err)
		}
	}
}
