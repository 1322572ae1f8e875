// Command faultproxy runs tests/faultproxy as a process: one route per
// -route flag, and the control API on -control. The 3-broker test cluster
// (tests/kafka/cluster.sh) starts one with a route per broker.
//
//	faultproxy -control 127.0.0.1:24140 -route 1=127.0.0.1:24131,127.0.0.1:24121 ...
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/wasmstream/wasmstream/tests/faultproxy"
)

type routes []string

func (r *routes) String() string     { return strings.Join(*r, " ") }
func (r *routes) Set(s string) error { *r = append(*r, s); return nil }

func main() {
	control := flag.String("control", "127.0.0.1:0", "address of the control API")
	var rs routes
	flag.Var(&rs, "route", "name=listen,upstream (repeatable)")
	flag.Parse()
	p := faultproxy.New()
	for _, r := range rs {
		name, addrs, ok := strings.Cut(r, "=")
		listen, upstream, ok2 := strings.Cut(addrs, ",")
		if !ok || !ok2 {
			fmt.Fprintf(os.Stderr, "faultproxy: -route %q: want name=listen,upstream\n", r)
			os.Exit(2)
		}
		if _, err := p.Add(name, listen, upstream); err != nil {
			fmt.Fprintf(os.Stderr, "faultproxy: route %s: %v\n", name, err)
			os.Exit(1)
		}
	}
	ln, err := net.Listen("tcp", *control)
	if err != nil {
		fmt.Fprintf(os.Stderr, "faultproxy: control: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "faultproxy: control on %s, %d routes\n", ln.Addr(), len(rs))
	go http.Serve(ln, p.Handler())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	p.Close()
}
