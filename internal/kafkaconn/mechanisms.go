package kafkaconn

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/scheduler/config"
)

// probeTimeout bounds offeredMechanisms: it runs on an error path only.
const probeTimeout = 5 * time.Second

// maxProbeResponse bounds the SASLHandshake response read: a list of
// mechanism names.
const maxProbeResponse = 64 << 10

// offeredMechanisms asks the first seed broker which SASL mechanisms its
// listener enables. A broker that refuses a client's mechanism lists them
// in its SASLHandshake response, but franz-go returns only the error code
// (kerr.UnsupportedSaslMechanism), so Explain asks again on a connection
// of its own (TLS as configured): a SASLHandshake v1 naming no mechanism a
// broker has, sent as the connection's first request, which a SASL
// listener answers before any authentication.
func offeredMechanisms(k config.Kafka) ([]string, error) {
	if len(k.Brokers) == 0 {
		return nil, errors.New("no seed broker")
	}
	tc, err := tlsConfig(k.TLS)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	c, err := dialer(tc, k.TLS)(ctx, "tcp", k.Brokers[0])
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(probeTimeout))
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = 1, "wasmstream-probe"
	// Request header v1: api key, version, correlation id, client id.
	msg := []byte{0, 0, 0, 0}
	msg = binary.BigEndian.AppendUint16(msg, uint16(req.Key()))
	msg = binary.BigEndian.AppendUint16(msg, uint16(req.Version))
	msg = binary.BigEndian.AppendUint32(msg, 1)
	id := k.ClientID
	if id == "" {
		id = "wasmstream"
	}
	msg = binary.BigEndian.AppendUint16(msg, uint16(len(id)))
	msg = append(msg, id...)
	msg = req.AppendTo(msg)
	binary.BigEndian.PutUint32(msg, uint32(len(msg)-4))
	if _, err := c.Write(msg); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > maxProbeResponse {
		return nil, fmt.Errorf("a SASLHandshake response of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c, body); err != nil {
		return nil, err
	}
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.Version = 1
	if err := resp.ReadFrom(body[4:]); err != nil { // after the correlation id
		return nil, err
	}
	return resp.SupportedMechanisms, nil
}
