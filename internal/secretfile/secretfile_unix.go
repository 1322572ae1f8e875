//go:build unix

package secretfile

import (
	"io/fs"
	"os"
	"syscall"
)

// openFlags open a secret file without waiting: a FIFO opened for reading
// would otherwise block until a writer comes, and a terminal would become
// the process's. Neither is read: check refuses them once opened.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY

// owner is the file's owner and group.
func owner(st fs.FileInfo) (uid, gid uint32, ok bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return s.Uid, s.Gid, true
}

// processGroups are the process's effective group and its supplementary
// groups (a pod's fsGroup is one).
func processGroups() []uint32 {
	groups := []uint32{uint32(os.Getegid())}
	more, _ := os.Getgroups()
	for _, g := range more {
		groups = append(groups, uint32(g))
	}
	return groups
}
