package window_test

import (
	"fmt"
	"time"

	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/window"
	"github.com/wasmstream/wasmstream/abi/guest/window/windowtest"
)

// A count per key and minute, emitted once per window when it closes (a
// minute plus 10 s of grace after its start), late records sent to
// clicks.late. In a module the record function gets its Host from Bind
// (the record's handle) and the timer function from the firing's; here an
// in-memory partition plays the host.
func Example() {
	perMinute, err := window.Tumbling(time.Minute, window.Options{
		Name:      "clicks",
		Grace:     10 * time.Second,
		LateTopic: "clicks.late",
		OnClose: func(r window.Result, out guest.Emitter) error {
			n, err := window.DecodeCount(r.Agg)
			if err != nil {
				return err
			}
			return out.Emit(guest.Output{Key: r.Key, Value: fmt.Appendf(nil, "%d clicks from %s", n, time.UnixMilli(r.Start).UTC().Format("15:04"))})
		},
	})
	if err != nil {
		panic(err)
	}
	proc := funcProc{
		record: perMinute.Add,
		timer:  perMinute.Fire,
	}
	p := windowtest.New()
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	for _, r := range []struct {
		user string
		at   time.Duration
	}{
		{"ann", 5 * time.Second},
		{"bob", 30 * time.Second},
		{"ann", 59 * time.Second},
		{"ann", 65 * time.Second}, // the next minute
		{"bob", 55 * time.Second}, // out of order, within grace
		{"bob", 70 * time.Second}, // stream time 9:01:10: 9:00 closes
		{"ann", 20 * time.Second}, // late: 9:00 is closed
	} {
		outs, err := p.Record(proc, guest.Record{Key: []byte(r.user), Value: []byte("click"), Timestamp: t0.Add(r.at)})
		if err != nil {
			panic(err)
		}
		for _, o := range outs {
			topic := o.Topic
			if topic == "" {
				topic = "output"
			}
			fmt.Printf("%s %s: %s\n", topic, o.Key, o.Value)
		}
	}
	fmt.Println(perMinute.Stats().Late, "late")
	// Output:
	// output ann: 2 clicks from 09:00
	// output bob: 2 clicks from 09:00
	// clicks.late ann: click
	// 1 late
}
