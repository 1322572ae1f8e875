#!/bin/sh
# Builds the wasmstream binary the way the container image does (Dockerfile):
# static (no cgo, no libc), reproducible paths, stripped. Run from the
# repository root. OUT: where to write it; VERSION: what `wasmstream version`
# says.
set -eu
: "${OUT:=wasmstream}"
: "${VERSION:=dev}"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o "$OUT" ./cmd/wasmstream
