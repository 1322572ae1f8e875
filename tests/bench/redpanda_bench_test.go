//go:build integration

package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// BenchmarkRedpandaTransforms: unmodified Redpanda Data Transforms built
// from Redpanda's published SDKs (tests/redpanda: Go, the SDK's identity
// transform; Rust, the conformance transform, the identity on these
// records) beside the native uppercase
// guests of the same language, over the same input on the same broker, one
// after the other (docs/REDPANDA-TRANSFORMS.md). The goal: a transform
// within 10% of its language's native guest in records/s and CPU per
// record. The smoke run takes the Go pair only.
func BenchmarkRedpandaTransforms(b *testing.B) {
	brokers, n, in, uppercase := uppercaseInput(b)
	dir := b.TempDir()
	rpGo := filepath.Join(dir, "redpanda-go-identity.wasm")
	cmd := exec.Command("go", "build", "-o", rpGo, ".")
	cmd.Dir = filepath.Join(wt.RepoRoot(b), "tests/redpanda/redpanda-go-identity")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build tests/redpanda/redpanda-go-identity: %v\n%s", err, out)
	}
	runs := []struct{ name, module string }{
		{"native-uppercase-go-guest", uppercase},
		{"redpanda-go-sdk-identity", rpGo},
	}
	if !smoke() {
		rustUpper := filepath.Join(dir, "rust-uppercase.wasm")
		os.WriteFile(rustUpper, wt.BuildRustGuest(b, "plugins/examples/rust-uppercase"), 0o644)
		rpRust := filepath.Join(dir, "redpanda-rust.wasm")
		os.WriteFile(rpRust, wt.BuildRustGuest(b, "tests/redpanda/redpanda-rust"), 0o644)
		runs = append(runs, struct{ name, module string }{"native-uppercase-rust-guest", rustUpper},
			struct{ name, module string }{"redpanda-rust-sdk-identity", rpRust})
	}
	for _, r := range runs {
		b.Run("wasmstream-"+r.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				el := host(b, brokers, r.module, in, n)
				b.ReportMetric(float64(n)/el.Seconds(), "rec/s")
			}
		})
	}
}
