//go:build !unix

package http1

import "net"

// alive cannot peek here: a connection the server closed is found out by
// the request that uses it, and sent again when that is harmless.
func alive(net.Conn) bool { return true }

// A peeker is alive's, kept by a conn.
type peeker struct{}

func (*peeker) alive(net.Conn) bool { return true }
