// Command testca makes a private CA and a server certificate it signs, for
// the schema registry the test command starts with TLS
// (tests/schemareg/apicurio.sh, APICURIO_SECURE=1): ca.pem, server.pem and
// server-key.pem (0600) in -dir, the server's valid for -hosts only, so a
// client must be given ca.pem (schema_registry.tls.ca_file) and must
// connect by one of those names.
//
//	go run ./tests/schemareg/testca -dir DIR [-hosts 127.0.0.1]
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/wasmstream/wasmstream/internal/tlsfiles/tlstest"
)

func main() {
	dir := flag.String("dir", "", "where to write ca.pem, server.pem and server-key.pem")
	hosts := flag.String("hosts", "127.0.0.1", "comma-separated IP addresses and names the server certificate is valid for")
	flag.Parse()
	if *dir == "" || *hosts == "" {
		fmt.Fprintln(os.Stderr, "testca: -dir and -hosts are required")
		os.Exit(2)
	}
	if err := tlstest.WriteFiles(*dir, strings.Split(*hosts, ",")...); err != nil {
		fmt.Fprintln(os.Stderr, "testca:", err)
		os.Exit(1)
	}
}
