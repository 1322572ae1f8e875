#!/bin/sh
# Runs the Dockerfile's build step on this machine (no container runtime
# needed) and checks what the image relies on: the binary is static, and
# it runs as the image's non-root user (65532) from a read-only directory
# with a read-only config, writing only to its state directory (the
# image's volume). Run from the repository root, as root (to switch user):
#   sh deploy/check/image_build.sh
set -eu
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
OUT="$work/bin/wasmstream" VERSION=check sh deploy/build-static.sh
bin="$work/bin/wasmstream"

# Static: no interpreter, no libc.
if file "$bin" | grep -q 'dynamically linked'; then
	echo "FAIL: $bin is dynamically linked: $(file "$bin")"; exit 1
fi
go version -m "$bin" | grep -q 'CGO_ENABLED=0' || { echo "FAIL: built with cgo"; exit 1; }

# A read-only directory with the config and a module, a state directory
# the user owns (the volume), and nothing else writable.
ro="$work/ro"; state="$work/state"
mkdir -p "$ro" "$state"
GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o "$ro/uppercase.wasm" ./plugins/examples/uppercase
cat > "$ro/config.yaml" <<YAML
kafka: {brokers: [embedded], group: image-check}
pipelines:
  - {name: uppercase, module: $ro/uppercase.wasm, inputs: [demo-in], output: demo-out, dead_letter_topic: demo-out.dlq}
metrics: {listen: "127.0.0.1:0"}
admin: {enabled: false}
host: {compile_cache_dir: $state/compiled}
YAML
chmod -R a-w "$ro"; chmod a+rx "$work" "$work/bin" "$ro"; chmod a+r "$ro"/*
chown 65532:65532 "$state"; chmod 0700 "$state"
as_user() { setpriv --reuid 65532 --regid 65532 --clear-groups env -i HOME=/nonexistent PATH=/usr/bin:/bin "$@"; }
as_user "$bin" version | grep -q 'wasmstream check' || { echo "FAIL: version"; exit 1; }
(cd "$ro" && as_user "$bin" validate uppercase.wasm >/dev/null) || { echo "FAIL: validate as 65532 in a read-only directory"; exit 1; }
(cd "$ro" && as_user "$bin" demo --config "$ro/config.yaml" --duration 3s --rate 5 --lookup-service "" > "$work/demo.out" 2>&1) || { cat "$work/demo.out"; echo "FAIL: demo as 65532"; exit 1; }
grep -q 'demo-out' "$work/demo.out" || { cat "$work/demo.out"; echo "FAIL: no output records"; exit 1; }
[ -n "$(find "$state/compiled" -type f | head -1)" ] || { echo "FAIL: nothing in the compile cache on the volume"; exit 1; }
echo "ok: static binary ($(du -h "$bin" | cut -f1)), runs as 65532 from a read-only directory, its compile cache on the state directory"
