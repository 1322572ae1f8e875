package codecache

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// trim removes what was unused for MaxAge, then the least recently used
// modules past the size bound; the most recent stay.
func TestTrim(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	mk := func(name string, used time.Time, size int) {
		m, err := c.Module(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(m.Dir(), "wazero-v"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(m.Dir(), "wazero-v", "entry"), make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Seal(); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(m.Dir(), manifestName), used, used); err != nil {
			t.Fatal(err)
		}
	}
	mk("aaaaaaaaaaaaaaaa", now.Add(-MaxAge-time.Hour), 10) // too old
	mk("bbbbbbbbbbbbbbbb", now.Add(-3*time.Hour), 1000)    // least recent
	mk("cccccccccccccccc", now.Add(-2*time.Hour), 1000)
	mk("dddddddddddddddd", now.Add(-time.Hour), 1000)
	c.trim(now, 2500)
	for name, want := range map[string]bool{"aaaaaaaaaaaaaaaa": false, "bbbbbbbbbbbbbbbb": false, "cccccccccccccccc": true, "dddddddddddddddd": true} {
		_, err := os.Stat(filepath.Join(c.Dir(), name))
		if (err == nil) != want {
			t.Errorf("%s kept %v, want %v", name, err == nil, want)
		}
	}
}

// A module's entries are checked against its manifest: a sealed entry
// verifies; one changed, one unsealed and a symbolic link are deleted.
func TestModuleVerifies(t *testing.T) {
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Module("0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		p := filepath.Join(m.Dir(), name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("good", "compiled")
	changed := write("changed", "compiled")
	if added, err := m.Seal(); err != nil || added != 2 {
		t.Fatalf("seal: %d added, %v", added, err)
	}
	write("changed", "compiled by someone else")
	unsealed := write("unsealed", "x")
	link := filepath.Join(m.Dir(), "link")
	if err := os.Symlink(changed, link); err != nil {
		t.Fatal(err)
	}
	m, err = c.Module("0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if m.Verified != 1 || len(m.Rejected) != 2 {
		t.Fatalf("verified %d, rejected %v; want 1 and [changed unsealed]", m.Verified, m.Rejected)
	}
	for _, p := range []string{changed, unsealed, link} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s not deleted: %v", p, err)
		}
	}
	if _, err := c.Module("../escape"); err == nil {
		t.Fatal("a digest with a path in it was accepted")
	}
}
