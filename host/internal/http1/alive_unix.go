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
	var p peeker
	return p.alive(nc)
}

// A peeker peeks at a connection for alive; a conn keeps one, so that a
// reuse costs no allocation (the raw connection and the function given to
// Control are made once).
type peeker struct {
	rc   syscall.RawConn
	peek func(fd uintptr)
	ok   bool
}

func (p *peeker) alive(nc net.Conn) bool {
	if p.rc == nil {
		sc, ok := nc.(syscall.Conn)
		if !ok {
			return true
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return false
		}
		p.rc = rc
		p.peek = func(fd uintptr) {
			var buf [1]byte
			_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			// Nothing to read yet (EAGAIN) is a connection still open;
			// its end (0 bytes) or bytes nobody asked for are not.
			p.ok = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		}
	}
	p.ok = false
	// Control, not Read: the descriptor as it is, whatever deadline the
	// last request left on the connection.
	err := p.rc.Control(p.peek)
	return err == nil && p.ok
}
