// Package faultproxy is a TCP proxy that injects network faults between a
// Kafka client and the brokers: added latency, a bandwidth cap, connections
// reset every few seconds, and a blackhole that holds every byte (and every
// new connection) until it is healed. The 3-broker test cluster
// (tests/kafka/cluster.sh) advertises one route per broker, so a client
// that bootstraps through the proxy talks to every broker through it, while
// the brokers replicate to each other directly.
//
// A Proxy is safe for concurrent use. Faults apply per route, to the
// connections open when they are set and to later ones.
package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Faults are what a route does to the bytes it forwards. The zero value
// forwards them untouched.
type Faults struct {
	// LatencyMS delays every chunk, each direction, by this many
	// milliseconds (the bytes keep their order).
	LatencyMS int `json:"latency_ms,omitempty"`
	// BytesPerSecond caps each direction of each connection (0: no cap).
	BytesPerSecond int `json:"bytes_per_second,omitempty"`
	// ResetEveryMS resets (RST) every connection of the route this often.
	ResetEveryMS int `json:"reset_every_ms,omitempty"`
	// Blackhole holds every byte both ways and every new connection: no
	// error, no close, nothing moves until it is cleared. What was held is
	// then delivered, as TCP would after a partition heals.
	Blackhole bool `json:"blackhole,omitempty"`
}

// RouteStats are a route's counters.
type RouteStats struct {
	Faults   Faults `json:"faults"`
	Accepted int64  `json:"accepted"`
	Resets   int64  `json:"resets"`
	Open     int    `json:"open"`
}

// Route forwards one listen address to one upstream address.
type Route struct {
	Name     string
	upstream string
	ln       net.Listener

	mu      sync.Mutex
	faults  Faults
	conns   map[*conn]struct{}
	healed  chan struct{} // closed when a blackhole ends; replaced when one begins
	resetT  *time.Ticker
	resetC  chan struct{} // closes the reset loop
	closed  bool
	accepts atomic.Int64
	resets  atomic.Int64
	wg      sync.WaitGroup
}

type conn struct {
	down, up net.Conn
}

// Listen starts a route: it accepts on listen and forwards each connection
// to upstream.
func Listen(name, listen, upstream string) (*Route, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	h := make(chan struct{})
	close(h)
	r := &Route{Name: name, upstream: upstream, ln: ln, conns: map[*conn]struct{}{}, healed: h}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Addr is the address the route listens on.
func (r *Route) Addr() string { return r.ln.Addr().String() }

// Set replaces the route's faults.
func (r *Route) Set(f Faults) {
	r.mu.Lock()
	defer r.mu.Unlock()
	was := r.faults
	r.faults = f
	switch {
	case f.Blackhole && !was.Blackhole:
		r.healed = make(chan struct{})
	case !f.Blackhole && was.Blackhole:
		close(r.healed)
	}
	if f.ResetEveryMS != was.ResetEveryMS {
		if r.resetC != nil {
			close(r.resetC)
			r.resetT.Stop()
			r.resetC, r.resetT = nil, nil
		}
		if f.ResetEveryMS > 0 {
			r.resetT = time.NewTicker(time.Duration(f.ResetEveryMS) * time.Millisecond)
			r.resetC = make(chan struct{})
			r.wg.Add(1)
			go r.resetLoop(r.resetT.C, r.resetC)
		}
	}
}

// Stats returns the route's faults and counters.
func (r *Route) Stats() RouteStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return RouteStats{Faults: r.faults, Accepted: r.accepts.Load(), Resets: r.resets.Load(), Open: len(r.conns)}
}

// Close stops the route and closes its connections.
func (r *Route) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.mu.Unlock()
	r.Set(Faults{}) // ends a blackhole and the reset loop
	r.ln.Close()
	r.resetAll()
	r.wg.Wait()
}

func (r *Route) current() (Faults, chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.faults, r.healed
}

func (r *Route) accept() {
	defer r.wg.Done()
	for {
		down, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.accepts.Add(1)
		r.wg.Add(1)
		go r.serve(down)
	}
}

// serve connects down to the upstream, once no blackhole holds it, and
// copies both ways until either side ends.
func (r *Route) serve(down net.Conn) {
	defer r.wg.Done()
	_, healed := r.current()
	<-healed
	up, err := net.DialTimeout("tcp", r.upstream, 5*time.Second)
	if err != nil {
		reset(down) // as a refused connection looks to the client
		return
	}
	c := &conn{down: down, up: up}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		reset(down)
		reset(up)
		return
	}
	r.conns[c] = struct{}{}
	r.mu.Unlock()
	var both sync.WaitGroup
	both.Add(2)
	go func() { defer both.Done(); r.pipe(up, down) }()
	go func() { defer both.Done(); r.pipe(down, up) }()
	both.Wait()
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}

type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst through the route's faults: a reader stamps each
// chunk, a writer releases it once its latency has passed, no blackhole
// holds it and the bandwidth allows. When either side fails both are
// closed.
func (r *Route) pipe(dst, src net.Conn) {
	q := make(chan chunk, 64) // bounded: a held writer stops the reader (TCP backpressure)
	go func() {
		defer close(q)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				q <- chunk{b[:n], time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		dst.Close()
		src.Close()
		for range q { // let the reader end
		}
	}()
	for c := range q {
		for {
			f, healed := r.current()
			<-healed
			if d := time.Until(c.at.Add(time.Duration(f.LatencyMS) * time.Millisecond)); d > 0 {
				time.Sleep(min(d, 50*time.Millisecond)) // re-read the faults: a heal applies at once
				continue
			}
			if f.Blackhole {
				continue
			}
			if f.BytesPerSecond > 0 {
				time.Sleep(time.Duration(len(c.b)) * time.Second / time.Duration(f.BytesPerSecond))
			}
			break
		}
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
}

func (r *Route) resetLoop(tick <-chan time.Time, stop chan struct{}) {
	defer r.wg.Done()
	for {
		select {
		case <-stop:
			return
		case <-tick:
			r.resetAll()
		}
	}
}

// resetAll resets every open connection of the route.
func (r *Route) resetAll() {
	r.mu.Lock()
	cs := make([]*conn, 0, len(r.conns))
	for c := range r.conns {
		cs = append(cs, c)
	}
	r.mu.Unlock()
	for _, c := range cs {
		r.resets.Add(1)
		reset(c.down)
		reset(c.up)
	}
}

// reset closes c with an RST rather than a FIN: the peer sees "connection
// reset by peer", as after a middlebox dropped its state.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// ErrNoRoute is returned for a route name the proxy does not have.
var ErrNoRoute = errors.New("faultproxy: no such route")

var _ io.Closer = (*Proxy)(nil)

// Proxy is a set of routes by name.
type Proxy struct {
	mu     sync.Mutex
	routes map[string]*Route
}

// New returns an empty proxy.
func New() *Proxy { return &Proxy{routes: map[string]*Route{}} }

// Add starts a route.
func (p *Proxy) Add(name, listen, upstream string) (*Route, error) {
	r, err := Listen(name, listen, upstream)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.routes[name] = r
	p.mu.Unlock()
	return r, nil
}

// Set sets the faults of route name.
func (p *Proxy) Set(name string, f Faults) error {
	p.mu.Lock()
	r := p.routes[name]
	p.mu.Unlock()
	if r == nil {
		return ErrNoRoute
	}
	r.Set(f)
	return nil
}

// Heal clears the faults of every route.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.routes {
		r.Set(Faults{})
	}
}

// Stats returns every route's stats by name.
func (p *Proxy) Stats() map[string]RouteStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]RouteStats{}
	for n, r := range p.routes {
		out[n] = r.Stats()
	}
	return out
}

// Close stops every route.
func (p *Proxy) Close() error {
	p.mu.Lock()
	rs := p.routes
	p.routes = map[string]*Route{}
	p.mu.Unlock()
	for _, r := range rs {
		r.Close()
	}
	return nil
}
