package kafkaconn

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
)

// ErrTLSListener is a plaintext connection answered by a TLS listener.
var ErrTLSListener = errors.New("TLS listener")

// errClosedPlain marks a plaintext connection closed or reset before its
// first answer, as a TLS listener does: Explain names the keys.
var errClosedPlain = errors.New("closed without answering")

// plainConn is a plaintext connection that recognises a TLS listener in
// the first bytes it reads. A Kafka response starts with its 4-byte size;
// a TLS listener given a plaintext request answers with a TLS record (an
// alert, content type 21, or a handshake, 22, then major version 3), whose
// first bytes read as a size above 350 MB, or closes the connection at
// once. Either is named instead of kgo's "invalid large response size" or
// a bare EOF.
type plainConn struct {
	net.Conn
	addr string
	// once guards the first read; prefix is what it read ahead and has
	// not handed back yet. Only Read touches them (kgo reads a connection
	// from one goroutine at a time; writes and Close may run beside).
	once   sync.Once
	prefix []byte
}

func (c *plainConn) Read(p []byte) (int, error) {
	var err error
	c.once.Do(func() { err = c.peek() })
	if err != nil {
		return 0, err
	}
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// peek reads the first 2 bytes and names a TLS listener.
func (c *plainConn) peek() error {
	var head [2]byte
	n, err := io.ReadFull(c.Conn, head[:])
	switch {
	case n == 0 && errors.Is(err, io.EOF):
		return fmt.Errorf("the broker at %s closed the connection without answering: a TLS (SSL or SASL_SSL) listener does this to a plaintext client; if it is one, set kafka.tls.enabled: true: %w (%w)", c.addr, io.EOF, errClosedPlain)
	case n == 0 && errors.Is(err, syscall.ECONNRESET):
		// A listener that closes with the request unread resets the
		// connection instead (a Java TLS listener, as the timing goes).
		return fmt.Errorf("the broker at %s reset the connection without answering: a TLS (SSL or SASL_SSL) listener does this to a plaintext client; if it is one, set kafka.tls.enabled: true: %w (%w)", c.addr, err, errClosedPlain)
	case n == 2 && (head[0] == 21 || head[0] == 22) && head[1] == 3:
		return fmt.Errorf("the broker at %s answered with TLS; is this an SSL or SASL_SSL listener? (set kafka.tls.enabled: true, or give the address of a PLAINTEXT listener): %w", c.addr, ErrTLSListener)
	case n == 0:
		return err
	}
	// A short read with an error: the bytes are handed back, the error
	// comes again from the next read of the connection.
	c.prefix = head[:n]
	return nil
}
