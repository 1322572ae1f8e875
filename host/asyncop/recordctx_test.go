package asyncop

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
)

// A RecordContext ends once: Cancel (or the deadline, once seen) closes
// Done if it was asked for, runs the watches still set, and Err says why;
// a watch set after the end runs at once, one stopped never runs.
func TestRecordContextEnds(t *testing.T) {
	t.Parallel()
	c := NewRecordContext(time.Now().Add(time.Hour))
	var ran atomic.Int32
	a := c.Watch(func() { ran.Add(1) })
	b := c.Watch(func() { ran.Add(10) })
	if !c.Unwatch(b) || c.Unwatch(b) {
		t.Fatal("Unwatch of a watch set: want true once, then false")
	}
	if c.Err() != nil {
		t.Fatalf("Err %v before the end", c.Err())
	}
	done := c.Done()
	c.Cancel()
	c.Cancel()
	select {
	case <-done:
	default:
		t.Fatal("Done is not closed after Cancel")
	}
	if ran.Load() != 1 || c.Unwatch(a) {
		t.Fatalf("watches ran %d (want the one set, once), and Unwatch after it ran is true", ran.Load())
	}
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("Err %v, want context.Canceled", c.Err())
	}
	if id := c.Watch(func() { ran.Add(100) }); id != 0 || ran.Load() != 101 {
		t.Fatalf("a watch set after the end: id %d, ran %d; want 0 and run at once", id, ran.Load())
	}
}

// The deadline ends a RecordContext without Cancel: at once where Err
// sees it passed, and by the timer the first Done arms, which runs the
// watches and ends context.AfterFunc's functions and child contexts.
func TestRecordContextDeadline(t *testing.T) {
	t.Parallel()
	past := NewRecordContext(time.Now().Add(-time.Millisecond))
	var ran atomic.Bool
	past.Watch(func() { ran.Store(true) })
	if !errors.Is(past.Err(), context.DeadlineExceeded) || !ran.Load() {
		t.Fatalf("a passed deadline: Err %v, watch ran %v; want DeadlineExceeded and run", past.Err(), ran.Load())
	}
	select {
	case <-past.Done():
	default:
		t.Fatal("Done of an ended context is not closed")
	}

	c := NewRecordContext(time.Now().Add(50 * time.Millisecond))
	child, cancel := context.WithCancel(c)
	defer cancel()
	after := make(chan struct{})
	context.AfterFunc(c, func() { close(after) })
	for _, ch := range []<-chan struct{}{c.Done(), child.Done(), after} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("the deadline did not end the context, its child or its AfterFunc within 10 s")
		}
	}
	if !errors.Is(c.Err(), context.DeadlineExceeded) || !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err %v, the child's %v; want DeadlineExceeded", c.Err(), child.Err())
	}
}

// hangingServer accepts connections and reads requests without ever
// answering.
func hangingServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// A lookup on the direct way that the service never answers ends when
// its record does: at Cancel (the record decided, its instance closed:
// the connection's watch of the RecordContext) long before the lookup's
// timeout, and at the record's deadline without Cancel (the connection's
// I/O deadline), its completion saying which.
func TestRecordContextEndsLookup(t *testing.T) {
	t.Parallel()
	addr := hangingServer(t)
	for _, tc := range []struct {
		name   string
		cancel bool
		want   string
	}{{"canceled", true, "canceled"}, {"deadline", false, "deadline"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			op := newHTTPOp(HTTP{AllowHosts: []string{addr}, Timeout: time.Minute}, "pipelines.lookup.async.http")
			t.Cleanup(op.CloseIdleConnections)
			req := abi.AppendHTTPRequest(nil, &abi.HTTPRequest{Method: "GET", URL: "http://" + addr + "/users/1"})
			deadline := time.Now().Add(time.Hour)
			if !tc.cancel {
				deadline = time.Now().Add(300 * time.Millisecond)
			}
			ctx := NewRecordContext(deadline)
			got := make(chan []byte, 1)
			start := time.Now()
			if _, err := op.Start(ctx, req, func(res []byte) { got <- res }); err != nil {
				t.Fatal(err)
			}
			if tc.cancel {
				// Most often the request is out by now and its read blocked
				// (the watch aborts it); else Do finds the context ended.
				time.Sleep(50 * time.Millisecond)
				ctx.Cancel()
			}
			select {
			case res := <-got:
				c, err := abi.DecodeCompletion(res)
				if err != nil || c.Code == abi.CompletionOK || !strings.Contains(strings.ToLower(c.Message), tc.want) {
					t.Fatalf("completion %+v (%v), want a failure saying %q", c, err, tc.want)
				}
				if el := time.Since(start); el > 20*time.Second {
					t.Fatalf("the lookup ended after %v", el)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the lookup did not end within 20 s of its record (its timeout is a minute)")
			}
		})
	}
}
