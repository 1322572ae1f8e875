// Package logbuf is a log destination for tests: written by the
// goroutines of what a test runs (a runner, a server, a host) while the
// test reads it.
package logbuf

import (
	"bytes"
	"sync"
)

// Buffer is an io.Writer that keeps what is written, safe for concurrent
// use; its zero value is ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
