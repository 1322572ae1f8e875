package dashboard

import (
	"sync"
	"time"
)

// Login attempts are throttled so that the admin token cannot be guessed
// at the speed the host answers (10,736 guesses in 3 s before), and a
// client's refused attempts are all counted and logged at a bounded rate
// (admin.RefusalLog). Two limits:
//
//   - Per client (its address): the first freeAttempts failures in a row
//     cost nothing, each further one doubles the wait before the next
//     attempt is looked at, from 1 s up to maxBackoff. A success forgets
//     the client.
//   - In all: a bucket of globalBurst attempts refilled at globalRate a
//     second, for guesses spread over many addresses.
//
// An attempt over either limit is answered 429 with Retry-After without
// looking at the token. Behind a proxy every client has the proxy's
// address and shares one backoff; a person who mistypes the token waits a
// second or two.
const (
	freeAttempts = 3
	maxBackoff   = time.Minute
	globalRate   = 2.0 // attempts a second
	globalBurst  = 10
	// maxClients bounds the clients remembered; past it the oldest
	// backoff is forgotten first.
	maxClients = 4096
)

// throttle is the state of both limits. Safe for concurrent use; its lock
// is a leaf.
type throttle struct {
	mu      sync.Mutex
	clients map[string]*backoff
	tokens  float64   // the global bucket
	filled  time.Time // when tokens was last refilled
}

type backoff struct {
	failures int
	until    time.Time // no attempt is looked at before this
}

func newThrottle() *throttle {
	return &throttle{clients: map[string]*backoff{}, tokens: globalBurst}
}

// allow reports whether an attempt of client may be checked now, and if
// not, how long it must wait.
func (t *throttle) allow(client string, now time.Time) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b := t.clients[client]; b != nil && now.Before(b.until) {
		return b.until.Sub(now), false
	}
	t.tokens = min(globalBurst, t.tokens+now.Sub(t.filled).Seconds()*globalRate)
	t.filled = now
	if t.tokens < 1 {
		return time.Duration((1 - t.tokens) / globalRate * float64(time.Second)), false
	}
	t.tokens--
	return 0, true
}

// failed records a refused attempt of client: past freeAttempts in a row,
// its next attempt waits 1 s, 2 s, 4 s... up to maxBackoff.
func (t *throttle) failed(client string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.clients[client]
	if b == nil {
		if len(t.clients) >= maxClients {
			t.forgetOldest()
		}
		b = &backoff{}
		t.clients[client] = b
	}
	b.failures++
	if n := b.failures - freeAttempts; n > 0 {
		b.until = now.Add(min(time.Second<<min(n-1, 16), maxBackoff))
	}
}

// succeeded forgets client's failures.
func (t *throttle) succeeded(client string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.clients, client)
}

// forgetOldest drops the client whose backoff ends first (t.mu held).
func (t *throttle) forgetOldest() {
	var oldest string
	var at time.Time
	for c, b := range t.clients {
		if oldest == "" || b.until.Before(at) {
			oldest, at = c, b.until
		}
	}
	delete(t.clients, oldest)
}
