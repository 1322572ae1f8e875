package admin

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// fakeClock is a Throttle's clock that moves only when the test says.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// bearer sends GET path to h from remote with token as its bearer token.
func bearer(h http.Handler, remote, path, token string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", path, nil)
	req.RemoteAddr = remote
	req.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// TestAPIBearerGuessesThrottled: 2,000 guesses of the admin token as
// Authorization: Bearer from one client are looked at FreeAttempts+1
// times, the rest refused with 429 and Retry-After; the right token from
// that client is refused as a guess would be until its wait is over, then
// accepted; another client is not held by the first one's wait (before:
// 2,000 of 2,000 looked at, the right one accepted at once after them).
func TestAPIBearerGuessesThrottled(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	_, _, _, api := newTestAPIWith(t, io.Discard, func(a *API) { a.throttle.now = clock.now })
	h := api.Handler()
	const n, guesser = 2000, "203.0.113.7:40000"
	looked, throttled := 0, 0
	for i := range n {
		switch w := bearer(h, guesser, "/v1/pipelines", fmt.Sprintf("guess-%d", i)); w.Code {
		case http.StatusUnauthorized:
			looked++
		case http.StatusTooManyRequests:
			throttled++
			if w.Header().Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
		default:
			t.Fatalf("guess %d: %d %s", i, w.Code, w.Body)
		}
	}
	t.Logf("%d guesses: %d looked at, %d throttled", n, looked, throttled)
	if looked != FreeAttempts+1 {
		t.Errorf("%d of %d guesses looked at in no time, want %d", looked, n, FreeAttempts+1)
	}
	if got := api.refusals.total.Load(); got != n {
		t.Errorf("%d refusals counted, want %d", got, n)
	}
	w := bearer(h, guesser, "/v1/pipelines", testToken)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("the right token from the guessing client in its wait: %d Retry-After %q, want 429 and 1", w.Code, w.Header().Get("Retry-After"))
	}
	if w := bearer(h, "198.51.100.9:1", "/v1/pipelines", testToken); w.Code != http.StatusOK {
		t.Fatalf("another client with the right token: %d %s", w.Code, w.Body)
	}
	clock.add(time.Second)
	if w := bearer(h, guesser, "/v1/pipelines", testToken); w.Code != http.StatusOK {
		t.Fatalf("the right token once the wait is over: %d %s", w.Code, w.Body)
	}
	// A success forgets the client's failures.
	if w := bearer(h, guesser, "/v1/pipelines", "wrong"); w.Code != http.StatusUnauthorized {
		t.Fatalf("a wrong token after a success: %d, want 401", w.Code)
	}
}

// TestThrottleOverallCap: guesses from many addresses are looked at
// GlobalBurst at once and GlobalRate a second after; a client with the
// right token waits no longer than the bucket takes to refill one attempt,
// and right tokens give their attempt back, so holders of the token are
// not limited by the bucket.
func TestThrottleOverallCap(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	th := NewThrottle()
	th.now = clock.now
	sum := TokenSum(testToken)
	looked := 0
	for i := range 300 {
		switch v, _ := th.Check(fmt.Sprintf("10.0.%d.%d", i/256, i%256), "wrong", sum); v {
		case Refused:
			looked++
		case Accepted:
			t.Fatal("a wrong token accepted")
		}
	}
	if looked != GlobalBurst {
		t.Fatalf("%d guesses from 300 clients looked at in no time, want %d", looked, GlobalBurst)
	}
	v, wait := th.Check("192.0.2.1", testToken, sum)
	if v != Throttled || wait <= 0 || wait > time.Duration(float64(time.Second)/GlobalRate) {
		t.Fatalf("the right token of a new client with the bucket empty: %v after %s, want throttled for at most %s", v, wait, time.Duration(float64(time.Second)/GlobalRate))
	}
	clock.add(wait)
	for i := range 3 * GlobalBurst {
		if v, _ := th.Check(fmt.Sprintf("192.0.2.%d", i+1), testToken, sum); v != Accepted {
			t.Fatalf("right token %d once the bucket holds one attempt: %v", i, v)
		}
	}
}

// TestClientOf: a client is its IP address; an IPv6 address counts under
// its /64, which one machine usually holds whole.
func TestClientOf(t *testing.T) {
	of := func(remote string) string {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		return ClientOf(r)
	}
	if a, b := of("10.0.0.1:5"), of("10.0.0.1:6"); a != "10.0.0.1" || a != b {
		t.Errorf("IPv4 clients %q %q", a, b)
	}
	if a, b, c := of("[2001:db8::1]:5"), of("[2001:db8::ffff:2]:6"), of("[2001:db8:0:1::1]:5"); a != b || a == c {
		t.Errorf("IPv6 clients %q %q %q: want one /64 each", a, b, c)
	}
}
