package dashboard

import "sync"

// hub fans the sampler's frames out to the event streams. The sampler
// never waits for a client: a client whose buffer is full is dropped (its
// stream ends; EventSource reconnects). Safe for concurrent use; its lock
// is a leaf.
//
// A stream that stops reading is not seen falling behind at once: the
// kernel's socket buffers take minutes of frames. So that such streams
// cannot keep real pages out, each client (a session, or the address of a
// bearer or of an open listener's page) holds at most maxPerClient streams
// — its oldest ends when it opens another — and a stream that finds the
// hub full ends the oldest stream of the client holding the most: a page
// that just opened (or just logged in) always gets in. Streams also end
// after Config.StreamMaxAge (dashboard.go), and a write that a reader
// leaves blocked for 10 s ends its stream.
type hub struct {
	mu      sync.Mutex
	clients map[*client]struct{}
	max     int
	last    []byte // the newest frame, sent first to a client that joins
	closed  bool
	dropped int64  // clients dropped for falling behind
	evicted int64  // streams ended to let another in
	seq     uint64 // join order
}

type client struct {
	ch  chan []byte
	who string // whose stream it is (Server.authorized)
	seq uint64
}

// clientBuffer is the frames a client may fall behind by before it is
// dropped.
const clientBuffer = 4

// maxPerClient is the streams one client may hold: a few browser tabs.
const maxPerClient = 4

func newHub(max int) *hub { return &hub{clients: map[*client]struct{}{}, max: max} }

// join adds a stream of who, ending another if who holds maxPerClient or
// the hub is full (see hub); ok is false only when the hub is closed.
func (h *hub) join(who string) (c *client, last []byte, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, false
	}
	if v := h.victim(who); v != nil {
		h.remove(v)
		h.evicted++
	}
	h.seq++
	c = &client{ch: make(chan []byte, clientBuffer), who: who, seq: h.seq}
	h.clients[c] = struct{}{}
	return c, h.last, true
}

// victim is the stream to end before who joins, or nil (h.mu held).
func (h *hub) victim(who string) *client {
	held := map[string]int{}
	oldest := map[string]*client{}
	for c := range h.clients {
		held[c.who]++
		if o := oldest[c.who]; o == nil || c.seq < o.seq {
			oldest[c.who] = c
		}
	}
	if held[who] >= maxPerClient {
		return oldest[who]
	}
	if len(h.clients) < h.max {
		return nil
	}
	var v *client
	for w, c := range oldest {
		if v == nil || held[w] > held[v.who] || (held[w] == held[v.who] && c.seq < v.seq) {
			v = c
		}
	}
	return v
}

// remove ends c's stream (h.mu held).
func (h *hub) remove(c *client) {
	delete(h.clients, c)
	close(c.ch)
}

// leave removes c (a no-op once it was dropped).
func (h *hub) leave(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.clients[c]; ok {
		h.remove(c)
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
			h.remove(c)
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
		h.remove(c)
	}
}
