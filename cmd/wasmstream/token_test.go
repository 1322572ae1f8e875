package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/scheduler/assembly"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// testAdminToken is the admin token of the tests' hosts: 32 random bytes
// in hex, as the host asks for.
const testAdminToken = "7871cfe2fea063455d7836fb6a0a689ac84911fc94c3d83626c358332a3bed2a"

// The host refuses a weak or placeholder admin token and a token file
// other users may read, saying how to fix it.
func TestAdminTokenChecks(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{Dir: dir, Admin: config.Admin{TokenFile: "admin.token"}}
	path := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(path, []byte(testAdminToken+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o644)
	t.Setenv("WASMSTREAM_ADMIN_TOKEN", "")
	if _, err := assembly.AdminToken(cfg); err == nil || !strings.Contains(err.Error(), "admin.token_file: "+path+" is accessible by group or others (mode 0644)") || !strings.HasSuffix(err.Error(), "chmod 600 "+path) {
		t.Fatalf("world-readable token file: %v", err)
	}
	os.Chmod(path, 0o600)
	if tok, err := assembly.AdminToken(cfg); err != nil || tok != testAdminToken {
		t.Fatalf("token file of mode 0600: %q %v", tok, err)
	}
	t.Setenv("WASMSTREAM_ADMIN_TOKEN", "s3cret")
	if _, err := assembly.AdminToken(cfg); err == nil || !strings.Contains(err.Error(), "WASMSTREAM_ADMIN_TOKEN: the admin token has about 4 bytes of entropy") || !strings.HasSuffix(err.Error(), "make one with `openssl rand -hex 32`") {
		t.Fatalf("short token in the environment: %v", err)
	}
	// The example Secret's placeholder (deploy/kubernetes/example).
	t.Setenv("WASMSTREAM_ADMIN_TOKEN", "CHANGE-ME-to-32-random-bytes-in-hex")
	if _, err := assembly.AdminToken(cfg); err == nil || !strings.Contains(err.Error(), "WASMSTREAM_ADMIN_TOKEN: the admin token is a placeholder") {
		t.Fatalf("the placeholder in the environment: %v", err)
	}
}
