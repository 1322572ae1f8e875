package guest

import "errors"

// Firing is a timer firing (ABI.md §4.2): the timer (Key, At) that a
// record or an earlier firing set (window.Bind(Handle()).SetTimer) is due,
// stream time having reached At.
type Firing struct {
	At         int64 // the timer's time, in milliseconds of stream time
	StreamTime int64 // the round's stream time, at or after At
	Partition  int32 // the input partition
	Attempt    uint32
	Topic      string // the input topic
	Key        []byte // the timer's key (a key of the partition's state)
}

// TimerFunc processes a timer firing: like a record, it may emit, read and
// write state (through window.Bind(Handle()), whose Host is the firing's),
// set later timers and fail (retried, or dead-lettered when terminal). It
// cannot wait on asynchronous operations: returning Pending fails it
// terminally.
type TimerFunc func(f *Firing, out Emitter) error

var timerFunc TimerFunc

// ProcessTimers registers the timer function, called for each due timer
// (the export wasmstream_on_timer); call it from init beside Process. A
// module that sets timers needs one: without it, a firing fails.
func ProcessTimers(fn TimerFunc) { timerFunc = fn }

// errFiringPending fails a firing whose function returned Pending.
var errFiringPending = Terminal(errors.New("guest: a timer firing cannot wait on asynchronous operations (ABI.md §4.2)"))

const noTimerFunc = "guest: a timer fired, but no timer function is registered (call guest.ProcessTimers from init)"
