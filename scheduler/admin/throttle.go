package admin

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Every way the admin token is presented — an Authorization: Bearer header
// on the admin API or on the dashboard, the dashboard's login form — goes
// through one Throttle, so that the token cannot be guessed at the speed
// the host answers (10,736 login guesses in 3 s before the login form was
// throttled; 2,000 Bearer guesses in 103 ms before Bearer was), nor by
// moving from one door to another. Two limits:
//
//   - Per client (its address; an IPv6 address by its /64, which one
//     machine usually holds whole): the first FreeAttempts failures in a
//     row cost nothing, each further one doubles the wait before the next
//     attempt is looked at, from 1 s up to MaxBackoff. A success forgets
//     the client.
//   - In all: a bucket of GlobalBurst attempts refilled at GlobalRate a
//     second, for guesses spread over many addresses. An attempt takes one
//     from the bucket before the token is looked at (so many at once take
//     no more than the bucket holds); a right token gives it back, so
//     clients that hold the token are not limited by their own rate.
//
// An attempt over either limit is answered 429 with Retry-After without
// looking at the token: the right token presented by a client in its wait
// is refused too, as a guess would be. Behind a proxy every client has the
// proxy's address and shares one backoff; a person who mistypes the token
// waits a second or two. A session cookie (the dashboard's) is not a token:
// it is checked by its MAC, which cannot be guessed, and is not throttled.
const (
	FreeAttempts = 3
	MaxBackoff   = time.Minute
	GlobalRate   = 2.0 // attempts a second
	GlobalBurst  = 10
	// maxClients bounds the clients remembered; past it the oldest
	// backoff is forgotten first.
	maxClients = 4096
)

// Throttle is the state of both limits, shared by every endpoint that
// takes the admin token. Safe for concurrent use; its lock is a leaf.
type Throttle struct {
	now func() time.Time // time.Now; tests move it

	mu      sync.Mutex
	clients map[string]*backoff
	tokens  float64   // the global bucket
	filled  time.Time // when tokens was last refilled
}

type backoff struct {
	failures int
	until    time.Time // no attempt is looked at before this
}

// NewThrottle returns a Throttle with no attempt seen.
func NewThrottle() *Throttle {
	return &Throttle{now: time.Now, clients: map[string]*backoff{}, tokens: GlobalBurst}
}

// Verdict is what Check made of an attempt.
type Verdict int

const (
	Accepted  Verdict = iota // the token is the admin token
	Refused                  // looked at: not the admin token
	Throttled                // not looked at: the client, or everyone, is over its share
)

// Check looks at token given by client (ClientOf) unless an attempt of
// client may not be looked at now, and records the outcome. wait is how
// long a Throttled client must wait before its next attempt is looked at.
func (t *Throttle) Check(client, given string, sum [32]byte) (v Verdict, wait time.Duration) {
	now := t.now()
	if wait, ok := t.allow(client, now); !ok {
		return Throttled, wait
	}
	if !TokenMatches(given, sum) {
		t.failed(client, now)
		return Refused, 0
	}
	t.succeeded(client)
	return Accepted, 0
}

// allow reports whether an attempt of client may be checked now, taking
// one from the global bucket, and if not, how long it must wait.
func (t *Throttle) allow(client string, now time.Time) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b := t.clients[client]; b != nil && now.Before(b.until) {
		return b.until.Sub(now), false
	}
	t.tokens = min(GlobalBurst, t.tokens+now.Sub(t.filled).Seconds()*GlobalRate)
	t.filled = now
	if t.tokens < 1 {
		return time.Duration((1 - t.tokens) / GlobalRate * float64(time.Second)), false
	}
	t.tokens--
	return 0, true
}

// failed records a refused attempt of client: past FreeAttempts in a row,
// its next attempt waits 1 s, 2 s, 4 s... up to MaxBackoff.
func (t *Throttle) failed(client string, now time.Time) {
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
	if n := b.failures - FreeAttempts; n > 0 {
		b.until = now.Add(min(time.Second<<min(n-1, 16), MaxBackoff))
	}
}

// succeeded forgets client's failures and gives back the attempt it took
// from the global bucket.
func (t *Throttle) succeeded(client string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.clients, client)
	t.tokens = min(GlobalBurst, t.tokens+1)
}

// forgetOldest drops the client whose backoff ends first (t.mu held).
func (t *Throttle) forgetOldest() {
	var oldest string
	var at time.Time
	for c, b := range t.clients {
		if oldest == "" || b.until.Before(at) {
			oldest, at = c, b.until
		}
	}
	delete(t.clients, oldest)
}

// ClientOf is who r's attempts are counted under: its client's IP address,
// an IPv6 address by its /64.
func ClientOf(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		h = r.RemoteAddr
	}
	ip := net.ParseIP(h)
	if ip == nil {
		return h
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}

// RetryAfter is wait as a Retry-After header's value: whole seconds,
// rounded up, at least 1.
func RetryAfter(wait time.Duration) string {
	return strconv.Itoa(max(1, int((wait+time.Second-1)/time.Second)))
}
