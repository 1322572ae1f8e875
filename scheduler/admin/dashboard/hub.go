package dashboard

import "sync"

// hub fans the sampler's frames out to the event streams. The sampler
// never waits for a client: a client whose buffer is full is dropped (its
// stream ends; EventSource reconnects). Safe for concurrent use; its lock
// is a leaf.
type hub struct {
	mu      sync.Mutex
	clients map[*client]struct{}
	max     int
	last    []byte // the newest frame, sent first to a client that joins
	closed  bool
	dropped int64 // clients dropped for falling behind
}

type client struct{ ch chan []byte }

// clientBuffer is the frames a client may fall behind by before it is
// dropped.
const clientBuffer = 4

func newHub(max int) *hub { return &hub{clients: map[*client]struct{}{}, max: max} }

// join adds a client; ok is false when the hub is closed or full.
func (h *hub) join() (c *client, last []byte, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || len(h.clients) >= h.max {
		return nil, nil, false
	}
	c = &client{ch: make(chan []byte, clientBuffer)}
	h.clients[c] = struct{}{}
	return c, h.last, true
}

// leave removes c (a no-op once it was dropped).
func (h *hub) leave(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.clients[c]; ok {
		delete(h.clients, c)
		close(c.ch)
	}
}

// publish sends b to every client without blocking.
func (h *hub) publish(b []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last = b
	for c := range h.clients {
		select {
		case c.ch <- b:
		default:
			delete(h.clients, c)
			close(c.ch)
			h.dropped++
		}
	}
}

// forget drops the newest frame (it is getting old).
func (h *hub) forget() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last = nil
}

// count is the number of clients.
func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// close ends every stream; joins fail from now on.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for c := range h.clients {
		delete(h.clients, c)
		close(c.ch)
	}
}
