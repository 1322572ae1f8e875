// Not a module anyone builds: this go.mod only keeps the replacement files
// below out of the tests/tools/jaeger module (its go build ./..., go mod tidy).
// tests/jaeger/jaeger.sh copies them over Jaeger's own source; see
// ../README.md.
module github.com/wasmstream/wasmstream/tests/tools/jaeger/slim

go 1.26.8
