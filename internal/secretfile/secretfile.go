// Package secretfile reads secrets (tokens, passwords, private keys) from
// files the way ssh reads private keys: a file that others may access is
// refused, since its secret is then no longer a secret.
//
// The rule, for every secret file the process reads (the admin token,
// kafka.sasl.password_file and token_file, kafka.tls.key_file, the AWS
// shared credentials):
//
//   - It is a regular file. A FIFO, socket, device or directory is refused
//     without blocking: the path is looked at, then opened non-blocking and
//     looked at again through the open descriptor (fstat) before anything
//     is read, so a named pipe put in place of a password file cannot hang
//     the process in open or read.
//   - No bit for others, and no group write or execute, ever.
//   - Group read (mode 0440 or 0640) only when root owns the file and the
//     file's group is one of this process's groups (its group or a
//     supplementary one): someone with root gave the process's own group
//     the file on purpose. This is what a Kubernetes Secret volume with
//     defaultMode 0400 gives a pod with an fsGroup (root:<fsGroup>, mode
//     0440; deploy/kubernetes/statefulset.yaml), and what an administrator
//     gives a service user with root:<service group> 0440. A group bit on a
//     file a user owns (a user's 0640 in a shared group) is refused.
//   - Not empty and at most max bytes; read within readTimeout. A read
//     that does not return (a file system that does not answer) is given up
//     on with an error; at most maxAbandoned such reads are left waiting in
//     the kernel, after which reads are refused at once.
package secretfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync/atomic"
	"time"
)

// readTimeout bounds a read of a secret file, the open included; a
// variable for the tests.
var readTimeout = 5 * time.Second

// maxAbandoned bounds the reads given up on that are still waiting in the
// kernel (each holds a goroutine and a descriptor until it returns).
const maxAbandoned = 4

// abandoned counts the reads given up on that have not returned.
var abandoned atomic.Int32

// openFile opens a secret file without blocking (openFlags); a variable
// for the tests.
var openFile = func(path string) (*os.File, error) { return os.OpenFile(path, openFlags, 0) }

// Read reads the file at path, at most max bytes, within readTimeout. It
// refuses what the package's rule refuses: a file that is not a regular
// file, one that others may access, an empty one and one larger than max.
// key names the config key that gave path and what the secret ("the admin
// token"), for the messages; no message holds any of the file's contents.
func Read(path, key, what string, max int) ([]byte, error) {
	if n := abandoned.Load(); n >= maxAbandoned {
		return nil, fmt.Errorf("%s: not reading %s: %d earlier reads of secret files have not returned after %s (a file system that does not answer?)", key, path, n, readTimeout)
	}
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	// state: 0 running, 1 returned, 2 given up on. Whichever of the read
	// and the timer moves it first decides who counts the abandoned read.
	var state atomic.Int32
	go func() { // ends when the read returns; a read given up on is counted in abandoned until then
		b, err := read(path, key, what, max)
		if !state.CompareAndSwap(0, 1) {
			abandoned.Add(-1)
		}
		done <- result{b, err}
	}()
	t := time.NewTimer(readTimeout)
	defer t.Stop()
	select {
	case r := <-done:
		return r.b, r.err
	case <-t.C:
		if !state.CompareAndSwap(0, 2) {
			r := <-done // it returned as the timer fired
			return r.b, r.err
		}
		abandoned.Add(1)
		return nil, fmt.Errorf("%s: reading %s did not end within %s: is it on a file system that does not answer?", key, path, readTimeout)
	}
}

func read(path, key, what string, max int) ([]byte, error) {
	// Looked at before the open: a device or FIFO is not even opened.
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if err := check(st, path, key, what); err != nil {
		return nil, err
	}
	f, err := openFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	defer f.Close()
	// And through the descriptor: the path may have been replaced since.
	if st, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if err := check(st, path, key, what); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if len(b) > max {
		return nil, fmt.Errorf("%s: %s is larger than %d bytes: want %s only", key, path, max, what)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%s: %s is empty", key, path)
	}
	return b, nil
}

// check applies the rule to what st says of the file at path.
func check(st fs.FileInfo, path, key, what string) error {
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: %s is not a regular file (%s): want a file holding %s only", key, path, kind(st.Mode()), what)
	}
	uid, gid, ok := owner(st)
	if !ok {
		return nil // no owner and mode bits to judge (Windows)
	}
	if perm := st.Mode().Perm(); !Permitted(perm, uid, gid, processGroups()) {
		return fmt.Errorf("%s: %s is accessible by group or others (mode %04o), so other users can read %s (a group may read it only when root owns the file and the group is this process's, as a Kubernetes Secret volume with defaultMode 0400 under the pod's fsGroup gives): chmod 600 %s", key, path, perm, what, path)
	}
	return nil
}

// Permitted reports whether the rule lets a secret file of mode perm,
// owned by uid and group gid, be read by a process whose groups are
// groups: no bit for others, no group write or execute, and group read
// only on a file root owns whose group is one of groups.
func Permitted(perm fs.FileMode, uid, gid uint32, groups []uint32) bool {
	perm &= fs.ModePerm
	if perm&0o037 != 0 {
		return false
	}
	return perm&0o040 == 0 || (uid == 0 && slices.Contains(groups, gid))
}

// kind names a file type for a message.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}
