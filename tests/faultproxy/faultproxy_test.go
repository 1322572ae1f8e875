package faultproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"testing"
	"time"
)

// echo serves an echo server for the test.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip writes a line and reads it back through c, returning how long
// it took.
func roundTrip(t *testing.T, c net.Conn, rd *bufio.Reader, deadline time.Duration) (time.Duration, error) {
	t.Helper()
	t0 := time.Now()
	c.SetDeadline(t0.Add(deadline))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	line, err := rd.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if line != "ping\n" {
		t.Fatalf("read %q", line)
	}
	return time.Since(t0), nil
}

// Each fault, set through the control API, does what it says, and a heal
// undoes it; what a blackhole held is delivered after the heal.
func TestFaults(t *testing.T) {
	p := New()
	defer p.Close()
	r, err := p.Add("1", "127.0.0.1:0", echo(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.Handler())
	defer srv.Close()
	ctl := Control{Addr: srv.Listener.Addr().String()}

	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	if d, err := roundTrip(t, c, rd, 5*time.Second); err != nil || d > time.Second {
		t.Fatalf("no fault: %v, %v", d, err)
	}

	if err := ctl.Set("1", Faults{LatencyMS: 200}); err != nil {
		t.Fatal(err)
	}
	if d, err := roundTrip(t, c, rd, 5*time.Second); err != nil || d < 400*time.Millisecond {
		t.Fatalf("200 ms each way: a round trip of %v (%v)", d, err)
	}

	if err := ctl.Set("1", Faults{Blackhole: true}); err != nil {
		t.Fatal(err)
	}
	var ne net.Error
	if _, err := roundTrip(t, c, rd, 500*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("blackhole: want a timeout, got %v", err)
	}
	if err := ctl.Heal(); err != nil {
		t.Fatal(err)
	}
	// The line the blackhole held arrives, then the next round trip.
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if line, err := rd.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("after the heal: %q, %v", line, err)
	}
	if _, err := roundTrip(t, c, rd, 5*time.Second); err != nil {
		t.Fatalf("after the heal: %v", err)
	}

	// 64 KiB at 64 KiB/s: about a second each way.
	if err := ctl.Set("1", Faults{BytesPerSecond: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	c.SetDeadline(t0.Add(10 * time.Second))
	go c.Write(make([]byte, 64<<10))
	if _, err := io.ReadFull(rd, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d < 1500*time.Millisecond {
		t.Fatalf("64 KiB echoed in %v under a 64 KiB/s cap each way", d)
	}

	if err := ctl.Set("1", Faults{ResetEveryMS: 100}); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := rd.ReadString('\n'); err == nil {
		t.Fatal("a connection survived a reset")
	}
	st, err := ctl.Stats()
	if err != nil || st["1"].Resets == 0 {
		t.Fatalf("stats %+v, %v: want resets counted", st, err)
	}
	if err := ctl.Set("2", Faults{}); err == nil {
		t.Fatal("a route that does not exist was set")
	}
}
