package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/scheduler/assembly"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// The host refuses a short admin token and a token file other users may
// read, saying how to fix it.
func TestAdminTokenChecks(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{Dir: dir, Admin: config.Admin{TokenFile: "admin.token"}}
	path := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(path, []byte("0123456789abcdef0123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o644)
	t.Setenv("WASMSTREAM_ADMIN_TOKEN", "")
	if _, err := assembly.AdminToken(cfg); err == nil || !strings.Contains(err.Error(), "admin.token_file: "+path+" is accessible by group or others (mode 0644)") || !strings.HasSuffix(err.Error(), "chmod 600 "+path) {
		t.Fatalf("world-readable token file: %v", err)
	}
	os.Chmod(path, 0o600)
	if tok, err := assembly.AdminToken(cfg); err != nil || tok != "0123456789abcdef0123" {
		t.Fatalf("token file of mode 0600: %q %v", tok, err)
	}
	t.Setenv("WASMSTREAM_ADMIN_TOKEN", "s3cret")
	if _, err := assembly.AdminToken(cfg); err == nil || !strings.Contains(err.Error(), "WASMSTREAM_ADMIN_TOKEN: the admin token is 6 bytes long, want at least 16") {
		t.Fatalf("short token in the environment: %v", err)
	}
}
