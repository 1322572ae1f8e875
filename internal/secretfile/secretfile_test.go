package secretfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// within runs f and fails the test if it has not returned after d: the
// reads here must never block.
func within[T any](t *testing.T, d time.Duration, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(d):
		t.Fatalf("still blocked after %s", d)
		panic("unreachable")
	}
}

// TestSecretFileRule: the mode, owner and group a secret file may have,
// on real files chowned in a temp dir (the tests run as root), and the
// rule alone for the numbers a Kubernetes Secret volume gives a pod.
func TestSecretFileRule(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	dir := t.TempDir()
	mine := uint32(os.Getegid())
	const other = 54321 // a group this process is not in
	for _, g := range processGroups() {
		if g == other {
			t.Fatalf("the process is in group %d", other)
		}
	}
	for _, tc := range []struct {
		name     string
		mode     fs.FileMode
		uid, gid uint32
		ok       bool
	}{
		{"owner read-write", 0o600, 0, mine, true},
		{"owner read-only", 0o400, 0, mine, true},
		{"a user's own file", 0o600, 1000, other, true},
		{"root's, group read, the process's group (a Secret volume under fsGroup)", 0o440, 0, mine, true},
		{"root's, owner write, group read, the process's group", 0o640, 0, mine, true},
		{"root's, group read, another group", 0o440, 0, other, false},
		{"a user's, group read, the process's group", 0o640, 1000, mine, false},
		{"a user's, group read, another group", 0o640, 1000, other, false},
		{"group write", 0o460, 0, mine, false},
		{"group execute", 0o450, 0, mine, false},
		{"others read", 0o444, 0, mine, false},
		{"others read only", 0o404, 0, mine, false},
		{"others write", 0o602, 0, mine, false},
		{"Secret volume's default mode 0644", 0o644, 0, mine, false},
	} {
		p := filepath.Join(dir, strings.NewReplacer(" ", "-", ",", "", "'", "", "(", "", ")", "").Replace(tc.name))
		if err := os.WriteFile(p, []byte("s3cret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, int(tc.uid), int(tc.gid)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, tc.mode); err != nil {
			t.Fatal(err)
		}
		b, err := Read(p, "kafka.sasl.password_file", "the Kafka password", 64)
		switch {
		case tc.ok && (err != nil || string(b) != "s3cret\n"):
			t.Errorf("%s: %q %v, want it read", tc.name, b, err)
		case !tc.ok && err == nil:
			t.Errorf("%s (mode %04o, %d:%d): read, want it refused", tc.name, tc.mode, tc.uid, tc.gid)
		case !tc.ok && (!strings.HasPrefix(err.Error(), "kafka.sasl.password_file: "+p+" is accessible by group or others") || !strings.HasSuffix(err.Error(), "chmod 600 "+p) || strings.Contains(err.Error(), "s3cret")):
			t.Errorf("%s: %v", tc.name, err)
		}
	}

	// What the kubelet makes of deploy/kubernetes' Secret volume
	// (defaultMode 0400, fsGroup 65532) for a pod running as 65532:65532.
	if !Permitted(0o440, 0, 65532, []uint32{65532}) {
		t.Error("root:65532 0440 refused to a process of group 65532")
	}
	if Permitted(0o440, 0, 0, []uint32{65532}) || Permitted(0o440, 65532, 65532, []uint32{65532}) || Permitted(0o444, 0, 65532, []uint32{65532}) {
		t.Error("a group read accepted outside the rule")
	}
}

// TestSecretFileNotRegular: a named pipe (with no writer, or a writer that
// never writes), a device, a directory, a socket and a link to a pipe are
// refused at once, naming the key and what the file is, never read.
func TestSecretFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "password")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	os.Symlink(fifo, link)
	for _, tc := range []struct{ name, path, want string }{
		{"named pipe", fifo, "is not a regular file (a named pipe)"},
		{"link to a named pipe", link, "is not a regular file (a named pipe)"},
		{"character device", "/dev/zero", "is not a regular file (a character device)"},
		{"directory", dir, "is not a regular file (a directory)"},
	} {
		err := within(t, 2*time.Second, func() error {
			_, err := Read(tc.path, "kafka.sasl.password_file", "the Kafka password", 64)
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "kafka.sasl.password_file: "+tc.path+" "+tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// A writer holds the pipe open and never writes: still no read.
	w, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := within(t, 2*time.Second, func() error { _, err := Read(fifo, "admin.token_file", "the admin token", 64); return err }); err == nil || !strings.Contains(err.Error(), "a named pipe") {
		t.Errorf("a pipe with a silent writer: %v", err)
	}
}

// TestSecretFileReplacedByPipeAfterCheck: a path that becomes a named pipe
// between the look at the path and the open is refused through the open
// descriptor (fstat), without blocking.
func TestSecretFileReplacedByPipeAfterCheck(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	os.WriteFile(p, []byte("tok"), 0o600)
	old := openFile
	defer func() { openFile = old }()
	openFile = func(path string) (*os.File, error) {
		os.Remove(path)
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			return nil, err
		}
		return old(path)
	}
	err := within(t, 2*time.Second, func() error { _, err := Read(p, "kafka.sasl.token_file", "the OAuth token", 64); return err })
	if err == nil || !strings.Contains(err.Error(), "kafka.sasl.token_file: "+p+" is not a regular file (a named pipe)") {
		t.Fatalf("%v", err)
	}
}

// TestSecretFileReadTimeout: a read that does not return (a file system
// that does not answer) is given up on after readTimeout; at most
// maxAbandoned such reads wait, then reads are refused at once; once they
// return, reads go on.
func TestSecretFileReadTimeout(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "password")
	os.WriteFile(p, []byte("pw"), 0o600)
	oldOpen, oldTimeout := openFile, readTimeout
	defer func() { openFile, readTimeout = oldOpen, oldTimeout }()
	release := make(chan struct{})
	openFile = func(path string) (*os.File, error) {
		<-release
		return oldOpen(path)
	}
	readTimeout = 100 * time.Millisecond
	for i := range maxAbandoned {
		err := within(t, 2*time.Second, func() error { _, err := Read(p, "kafka.sasl.password_file", "the Kafka password", 64); return err })
		if err == nil || !strings.Contains(err.Error(), "kafka.sasl.password_file: reading "+p+" did not end within 100ms") {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	start := time.Now()
	_, err := Read(p, "kafka.sasl.password_file", "the Kafka password", 64)
	if err == nil || !strings.Contains(err.Error(), "4 earlier reads of secret files have not returned") || time.Since(start) > 50*time.Millisecond {
		t.Fatalf("a read past the bound: %v after %s", err, time.Since(start))
	}
	close(release)
	for deadline := time.Now().Add(5 * time.Second); abandoned.Load() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d reads still counted after they returned", abandoned.Load())
		}
	}
	if b, err := Read(p, "kafka.sasl.password_file", "the Kafka password", 64); err != nil || string(b) != "pw" {
		t.Fatalf("after the reads returned: %q %v", b, err)
	}
}

// TestSecretFileSizes: empty and oversized files are refused.
func TestSecretFileSizes(t *testing.T) {
	dir := t.TempDir()
	empty, big := filepath.Join(dir, "empty"), filepath.Join(dir, "big")
	os.WriteFile(empty, nil, 0o600)
	os.WriteFile(big, make([]byte, 65), 0o600)
	if _, err := Read(empty, "k", "x", 64); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("empty: %v", err)
	}
	if _, err := Read(big, "k", "x", 64); err == nil || !strings.Contains(err.Error(), "larger than 64 bytes") {
		t.Errorf("big: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "missing"), "k", "x", 64); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
}
