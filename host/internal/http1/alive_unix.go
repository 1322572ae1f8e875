//go:build unix

package http1

import (
	"net"
	"syscall"
)

// alive reports whether an idle connection may still be used: the server
// has not closed it (a read would see its end) nor sent anything unasked.
// It peeks without blocking, one system call.
func alive(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = false
	var buf [1]byte
	// Control, not Read: the descriptor as it is, whatever deadline the
	// last request left on the connection.
	err = rc.Control(func(fd uintptr) {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Nothing to read yet (EAGAIN) is a connection still open; its
		// end (0 bytes) or bytes nobody asked for are not.
		ok = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
	})
	return err == nil && ok
}
