// Command lookupsrv serves the lookup service (package lookupsrv) in a
// process of its own, so that a benchmark measures the host's CPU apart from
// the service's. It prints its base URL on the first line of its output and
// serves until its standard input closes.
//
//	lookupsrv -delay 10ms
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/wasmstream/wasmstream/tests/lookupsrv"
)

func main() {
	delay := flag.Duration("delay", 0, "how long each answer waits")
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lookupsrv:", err)
		os.Exit(1)
	}
	d := *delay
	srv := &http.Server{Handler: lookupsrv.Handler(func(string) time.Duration { return d })}
	fmt.Printf("http://%s\n", ln.Addr())
	go func() {
		io.Copy(io.Discard, os.Stdin) // the parent went away: stop
		os.Exit(0)
	}()
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, "lookupsrv:", err)
		os.Exit(1)
	}
}
