package kafkaconn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/config"
)

// Explain says in the user's words what a refusal of the brokers means
// under k: a wrong password, a mechanism the listener does not enable
// (with those it offers: it asks the broker, offeredMechanisms), a
// listener that wants SASL, a TLS listener that closed a plaintext
// connection; a request that timed out is told why the last
// connection to a broker failed within the last minute (a TLS handshake
// that got no answer, a refused connection). Other errors come back as
// they are. The result wraps err.
func Explain(k config.Kafka, err error) error {
	if err == nil {
		return nil
	}
	s := k.SASL
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		// A request that gave up waiting: say why the connections it
		// waited for failed, if one did lately.
		if last := lastDial.since(time.Minute); last != nil && !strings.Contains(err.Error(), last.Error()) {
			return fmt.Errorf("%w (the last connection to a broker failed: %v)", err, last)
		}
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Errorf("the brokers refused the credentials of user %q with kafka.sasl.mechanism %s: wrong username or password, the user does not exist for this mechanism, or the token was refused: %w", s.Username, s.Mechanism, err)
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		offered := "ask for the mechanisms it has"
		if ms, perr := offeredMechanisms(k); perr == nil && len(ms) > 0 {
			offered = "it offers " + strings.Join(ms, ", ")
		} else if perr != nil {
			offered += " (asking it failed: " + perr.Error() + ")"
		}
		return fmt.Errorf("the brokers' listener does not enable kafka.sasl.mechanism %s (its sasl.enabled.mechanisms lacks it): %s; set one of them, or use another listener: %w", s.Mechanism, offered, err)
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
		return fmt.Errorf("the brokers deny this host's principal WRITE on its transactional id (exactly_once: pipelines' transactions.id, by default <group>.<host.id>; README.md, \"ACLs the host needs\"): %w", err)
	case !k.TLS.Enabled && (errors.Is(err, errClosedPlain) || errors.As(err, new(*kgo.ErrFirstReadEOF))):
		// kgo's own text (ErrFirstReadEOF) says "is TLS missing?" or,
		// after a request, "is SASL missing?" even when kafka.sasl is
		// set, and a reset is a bare "connection reset by peer": name the
		// keys.
		who := "a TLS (SSL or SASL_SSL) listener does this to a plaintext client"
		if s.Mechanism != "" {
			who = fmt.Sprintf("a SASL_SSL listener does this to a client that does not start TLS (kafka.sasl.mechanism is %s, kafka.tls.enabled is false: SASL_PLAINTEXT)", s.Mechanism)
		}
		return fmt.Errorf("the broker closed the connection without answering: %s; if it is one, set kafka.tls.enabled: true (and kafka.tls.ca_file if its certificate is not from a public CA): %w", who, err)
	case errors.Is(err, kerr.IllegalSaslState):
		if s.Mechanism != "" {
			return fmt.Errorf("the brokers' listener does not take SASL (an SSL or PLAINTEXT listener?) but kafka.sasl.mechanism is %s: %w", s.Mechanism, err)
		}
	}
	return err
}
