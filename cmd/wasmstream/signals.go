package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// signals is how run and demo stop: the first SIGINT or SIGTERM ends ctx,
// and the host shuts down gracefully within shutdown.drain_timeout plus
// assembly.ShutdownMargin; a second one ends the process at once, with
// status 128 + the signal's number, saying so. It is installed before the
// config is read, so a signal that arrives while the process starts is
// caught too: the start is cut short and the process exits cleanly.
type signals struct {
	ctx    context.Context // ends at the first signal (or stop)
	cancel context.CancelFunc
	ch     chan os.Signal
	done   chan struct{} // closed by release: the watcher returns
}

// exitNow ends the process at a second signal (a variable for tests).
var exitNow = os.Exit

// catchSignals starts watching SIGINT and SIGTERM; the watcher goroutine
// is the caller's, ended by release.
func catchSignals(stderr io.Writer) *signals {
	ctx, cancel := context.WithCancel(context.Background())
	s := &signals{ctx: ctx, cancel: cancel, ch: make(chan os.Signal, 2), done: make(chan struct{})}
	signal.Notify(s.ch, os.Interrupt, syscall.SIGTERM)
	go s.watch(stderr)
	return s
}

func (s *signals) watch(stderr io.Writer) {
	select {
	case <-s.ch:
		s.cancel()
	case <-s.done:
		return
	}
	select {
	case sig := <-s.ch:
		fmt.Fprintf(stderr, "wasmstream: a second signal (%s) during shutdown: exiting now, without finishing it (records not yet committed will be processed again on restart)\n", sig)
		code := 1
		if n, ok := sig.(syscall.Signal); ok {
			code = 128 + int(n)
		}
		exitNow(code)
	case <-s.done:
	}
}

// release stops watching: signals get their default handling again.
func (s *signals) release() {
	signal.Stop(s.ch)
	s.cancel()
	select {
	case <-s.done:
	default:
		close(s.done)
	}
}
