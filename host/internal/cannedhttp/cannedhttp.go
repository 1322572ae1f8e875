// Package cannedhttp is a loopback HTTP/1.1 service for the allocation
// tests of the lookup path (host and host/asyncop): it answers every
// request with the same response, as the lookup service of
// BenchmarkAsyncIO does (net/http's server: Content-Type, Date and
// Content-Length, a small JSON body), and allocates nothing a request, so
// that what a test counts of the process's allocations is the client's.
package cannedhttp

import (
	"bufio"
	"bytes"
	"net"
	"strconv"
	"sync"
	"testing"
)

// A Server answers at Addr until the test ends.
type Server struct {
	Addr string // host:port
	resp []byte
	ln   net.Listener
	wg   sync.WaitGroup // the accept loop and each connection's goroutine
	mu   sync.Mutex
	open map[net.Conn]bool
}

// New starts a Server whose every response has body, an
// application/json one; the test's cleanup stops it.
func New(t testing.TB, body string) *Server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: ln.Addr().String(), ln: ln, open: map[net.Conn]bool{},
		resp: []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Sun, 06 Dec 2026 09:00:00 GMT\r\n" +
			"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.open[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

// serve answers each request of c, a head without a body (the lookups are
// GETs), until the client closes it.
func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				break
			}
		}
		if _, err := c.Write(s.resp); err != nil {
			return
		}
	}
}

func (s *Server) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.open {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
