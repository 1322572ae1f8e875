package host

import (
	"context"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/asyncop"
)

// FuzzOperationStart feeds the bytes a guest passes to async_start to the
// operations. Whatever they are, Start either refuses them (and never calls
// done) or calls done exactly once with a result that decodes. No request
// reaches the network: the context is canceled before Start, and the only
// allowed host is a closed port. The state operations (StartRecord, over a
// small map) run with a live context, and their payloads decode too.
func FuzzOperationStart(f *testing.F) {
	f.Add(int32(abi.OpHTTP), abi.AppendHTTPRequest(nil, &abi.HTTPRequest{Method: "GET", URL: "http://127.0.0.1:1/users/7"}))
	f.Add(int32(abi.OpHTTP), abi.AppendHTTPRequest(nil, &abi.HTTPRequest{Method: "POST", URL: "http://127.0.0.1:1/",
		Headers: []abi.Header{{Key: "Bad Name", Value: []byte("v\r\n")}}, Body: []byte("x"), Timeout: time.Second}))
	f.Add(int32(abi.OpHTTP), abi.AppendHTTPRequest(nil, &abi.HTTPRequest{Method: "GET", URL: "http://elsewhere.example/"}))
	f.Add(int32(abi.OpHTTP), abi.AppendHTTPRequest(nil, &abi.HTTPRequest{Method: "G ET", URL: "::"}))
	f.Add(int32(abi.OpTimer), abi.AppendTimer(nil, time.Hour))
	f.Add(int32(abi.OpTimer), []byte{1})
	f.Add(int32(abi.OpStateGet), abi.AppendStateGet(nil, []byte("a")))
	f.Add(int32(abi.OpStateGet), abi.AppendStateGet(nil, []byte("other-a")))
	f.Add(int32(abi.OpStateScan), abi.AppendStateScan(nil, &abi.StateScanRequest{Prefix: []byte("a"), MaxBytes: 9}))
	st := &mapState{m: map[string][]byte{"a": []byte("1"), "ab": {}, "b": []byte("2")}, maxValue: 64, foreign: "other-"}
	ops := map[abi.OpKind]Operation{
		abi.OpTimer:     timerOp{},
		abi.OpHTTP:      asyncop.NewHTTP(asyncop.HTTP{AllowHosts: []string{"127.0.0.1:1"}, MaxRequestBytes: 64}, ""),
		abi.OpStateGet:  stateGetOp{},
		abi.OpStateScan: stateScanOp{},
	}
	f.Fuzz(func(t *testing.T, kind int32, req []byte) {
		op := ops[abi.OpKind(kind)]
		if op == nil {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		results := make(chan []byte, 2)
		done := func(r []byte) { results <- r }
		var err error
		if ro, ok := op.(RecordOperation); ok {
			_, err = ro.StartRecord(ctx, st, req, done)
		} else {
			cancel()
			_, err = op.Start(ctx, req, done)
		}
		if err != nil {
			select {
			case <-results:
				t.Fatalf("done was called for a refused request: %v", err)
			default:
			}
			return
		}
		var res []byte
		select {
		case res = <-results:
		case <-time.After(10 * time.Second):
			t.Fatal("done was not called")
		}
		c, err := abi.DecodeCompletion(res)
		if err != nil {
			t.Fatalf("result does not decode: %v", err)
		}
		if c.Code == abi.CompletionOK {
			switch abi.OpKind(kind) {
			case abi.OpStateGet:
				_, _, err = abi.DecodeStateGetResult(c.Payload)
			case abi.OpStateScan:
				err = abi.DecodeStateEntries(c.Payload, func(k, v []byte) bool { return true })
			}
			if err != nil {
				t.Fatalf("payload does not decode: %v", err)
			}
		}
		select {
		case <-results:
			t.Fatal("done was called twice")
		case <-time.After(time.Millisecond):
		}
	})
}
