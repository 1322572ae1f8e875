package asyncop

import "time"

// goroutines runs the asynchronous operations' blocking work (an HTTP
// request from start to body). Every operation used to start a goroutine
// of its own, whose stack then grew to what net/http's client needs (some
// 16 KiB, by copying it three times): a few µs of every lookup. These
// goroutines outlive one operation and keep their grown stacks.
var goroutines = &goroutinePool{work: make(chan func()), idle: 10 * time.Second}

// goroutinePool runs functions on goroutines that wait for more work after
// one ends, and exit after idle without any. It owns them. It never queues:
// Go starts a goroutine when none waits, so there are never more than the
// operations running at once (async.max_in_flight bounds those), and none
// once the host is idle.
type goroutinePool struct {
	work chan func() // unbuffered: a send succeeds only into a waiting goroutine
	idle time.Duration
}

// Go runs f on a waiting goroutine of the pool, or on a new one.
func (p *goroutinePool) Go(f func()) {
	select {
	case p.work <- f:
	default:
		go p.run(f)
	}
}

// run runs f, then whatever work comes before it has been idle too long.
func (p *goroutinePool) run(f func()) {
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		f()
		f = nil // what f held is not kept while waiting
		t.Reset(p.idle)
		select {
		case f = <-p.work:
		case <-t.C:
			return
		}
	}
}
