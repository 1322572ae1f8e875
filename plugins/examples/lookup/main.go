// Command lookup is a wasmstream processor that enriches each record with
// what an HTTP service knows about its key, without blocking: it starts a
// GET of $LOOKUP_URL<key> and returns; the host performs the request while
// the instance takes other records, and calls back with the response. One
// instance keeps many lookups in flight (pipelines[].async.max_in_flight).
//
// The output's value is a JSON object:
//
//	{"key": "...", "record": <the input value>, "lookup": <the response body>, "attempt": 1}
//
// where the input value and the body are embedded as JSON when they are
// JSON, as strings otherwise, and "lookup" is null when the service answers
// 404. A 5xx or 429 answer or a transport error fails the record retryably;
// another 4xx, a refusal by the host's allow list, a null key or an unset
// LOOKUP_URL fails it terminally (dead letter).
//
// Configure it with the pipeline's env and allow the service's host:
//
//	env: {LOOKUP_URL: "http://127.0.0.1:8089/users/"}
//	async: {http: {allow_hosts: ["127.0.0.1:8089"]}}
//
// The record header "lookup.mode" makes it misbehave on purpose, to test the
// host: "leak" re-arms a timer forever and never decides the record (the
// record deadline must catch it); "panic" panics in the continuation (the
// instance is discarded with the other lookups it had in flight);
// "pending" returns guest.Pending without starting anything; "chain" waits
// 5 ms on a timer after the lookup before emitting; "local" looks nothing
// up and emits at once ("lookup" null), deciding the record in its call.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o lookup.wasm .
package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/wasmstream/wasmstream/abi/guest"
)

func main() {}

func init() { guest.Process(lookup) }

func lookup(r *guest.Record, out guest.Emitter) error {
	if base == "" {
		base = os.Getenv("LOOKUP_URL") // read once it is set: ~0.3 µs a call
	}
	if base == "" {
		return guest.Terminal(errors.New("LOOKUP_URL is not set (pipelines[].env)"))
	}
	if r.Key == nil {
		return guest.Terminal(errors.New("the record has no key to look up"))
	}
	mode, _ := r.Header("lookup.mode")
	switch string(mode) {
	case "leak":
		return leak()
	case "pending":
		return guest.Pending
	case "local":
		value = appendResult(value[:0], r, nil)
		return out.Emit(guest.Output{Key: r.Key, Value: value})
	}
	// The same on every attempt: a service that deduplicates sees one
	// request per record. (Await copies the request, so its header lives
	// in buffers reused from record to record.)
	idem = r.AppendIdempotencyKey(idem[:0])
	reqHeaders[0] = guest.Header{Key: "Idempotency-Key", Value: idem}
	req := guest.HTTPRequest{URL: base + url.PathEscape(string(r.Key)), Headers: reqHeaders[:]}
	return guest.Await(guest.HTTP(req), func(resp *guest.HTTPResponse, err error) error {
		if string(mode) == "panic" {
			panic("asked to panic in the continuation")
		}
		if err != nil {
			if guest.IsRefused(err) {
				return guest.Terminal(err)
			}
			return err
		}
		var found []byte
		switch {
		case resp.Status == 200:
			found = resp.Body
		case resp.Status == 404:
		case resp.Status == 429 || resp.Status >= 500:
			return fmt.Errorf("lookup service answered %d", resp.Status)
		default:
			return guest.Terminal(fmt.Errorf("lookup service answered %d: %.200s", resp.Status, resp.Body))
		}
		if string(mode) == "chain" {
			return guest.Await(guest.Timer(5*time.Millisecond), func(struct{}, error) error { return emitResult(r, out, resp.Status, found) })
		}
		return emitResult(r, out, resp.Status, found)
	})
}

// Buffers reused from record to record: Await and Emit copy what they are
// given, and a Go guest pays ~0.5 µs for each allocation.
var (
	base       string // $LOOKUP_URL
	idem       []byte
	reqHeaders [1]guest.Header
	value      []byte
	status     []byte
	outHeaders [1]guest.Header
)

// emitResult emits the record's output: the lookup's result and status.
func emitResult(r *guest.Record, out guest.Emitter, code int, found []byte) error {
	value = appendResult(value[:0], r, found)
	status = strconv.AppendInt(status[:0], int64(code), 10)
	outHeaders[0] = guest.Header{Key: "lookup.status", Value: status}
	return out.Emit(guest.Output{Key: r.Key, Value: value, Headers: outHeaders[:]})
}

// leak never decides its record.
func leak() error {
	return guest.Await(guest.Timer(10*time.Millisecond), func(struct{}, error) error { return leak() })
}

// appendResult appends the output's value to b, built by appending:
// encoding/json's reflection over a map costs a Go guest more than the rest
// of the record's path together (~35 µs of ~60 µs per record under wazero,
// measured with BenchmarkLookupRecord in host/).
func appendResult(b []byte, r *guest.Record, found []byte) []byte {
	b = append(b, `{"key":`...)
	b = guest.AppendJSONString(b, r.Key)
	b = append(b, `,"record":`...)
	b = guest.AppendJSON(b, r.Value)
	b = append(b, `,"lookup":`...)
	b = guest.AppendJSON(b, found)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(r.Attempt), 10)
	return append(b, '}')
}
