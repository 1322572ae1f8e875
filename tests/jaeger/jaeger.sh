#!/usr/bin/env bash
# Build Jaeger (v2, the OpenTelemetry-collector based all-in-one binary) from
# source and run it as a plain process on 127.0.0.1 with in-memory storage, as
# the trace backend for tests. The Jaeger version is pinned by the separate Go
# module in tests/tools/jaeger; the build is slimmed to the components the
# tests use (OTLP receiver, memory storage, query API) by the replacement
# files in tests/tools/jaeger/slim (see the README.md there).
#
#   jaeger.sh build    binary -> $WASMSTREAM_CACHE/jaeger/jaeger-<version>
#                      (no-op when already built from the same go.mod/go.sum
#                      and slim files)
#   jaeger.sh start    build if needed, write the config, start, wait until the
#                      query API and the OTLP ports answer; prints
#                      JAEGER_QUERY=http://127.0.0.1:<port>
#                      JAEGER_OTLP_HTTP=127.0.0.1:<port>
#                      JAEGER_OTLP_GRPC=127.0.0.1:<port>   on stdout
#   jaeger.sh stop     TERM (then KILL after a deadline), idempotent
#   jaeger.sh status   exit 0 iff running and answering; prints the same lines
#
# Every diagnostic goes to stderr prefixed "jaeger.sh:"; stdout carries only
# the JAEGER_*=... lines (start, status), so `eval "$(jaeger.sh start)"` works.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TOOL_DIR="$(cd "$SCRIPT_DIR/../tools/jaeger" && pwd)"
SLIM_DIR="$TOOL_DIR/slim"
JAEGER_MODULE="github.com/jaegertracing/jaeger"
TOOL_PKG="$JAEGER_MODULE/cmd/jaeger"

CACHE_ROOT="${WASMSTREAM_CACHE:-$HOME/.cache/wasmstream}"
BIN_DIR="$CACHE_ROOT/jaeger"

JAEGER_DATA_DIR="${JAEGER_DATA_DIR:-/tmp/wasmstream-jaeger}"
JAEGER_HOST=127.0.0.1
JAEGER_QUERY_PORT="${JAEGER_QUERY_PORT:-16686}"
JAEGER_QUERY_GRPC_PORT="${JAEGER_QUERY_GRPC_PORT:-16685}"
JAEGER_OTLP_GRPC_PORT="${JAEGER_OTLP_GRPC_PORT:-4317}"
JAEGER_OTLP_HTTP_PORT="${JAEGER_OTLP_HTTP_PORT:-4318}"
JAEGER_MAX_TRACES="${JAEGER_MAX_TRACES:-100000}"
JAEGER_START_TIMEOUT="${JAEGER_START_TIMEOUT:-60}"
JAEGER_STOP_TIMEOUT="${JAEGER_STOP_TIMEOUT:-15}"
JAEGER_LOG_LEVEL="${JAEGER_LOG_LEVEL:-info}"

PID_FILE="$JAEGER_DATA_DIR/jaeger.pid"
LOG_FILE="$JAEGER_DATA_DIR/jaeger.log"
CONFIG_FILE="$JAEGER_DATA_DIR/config.yaml"
DATA_MARKER="$JAEGER_DATA_DIR/.wasmstream-jaeger-data"

say() { printf 'jaeger.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

now() { date +%s; }

# The Jaeger version is whatever tests/tools/jaeger/go.mod requires.
jaeger_version() {
    local v
    v="$(awk '$1 == "github.com/jaegertracing/jaeger" { print $2; exit }' "$TOOL_DIR/go.mod")"
    [[ -n "$v" ]] || die "no github.com/jaegertracing/jaeger requirement in $TOOL_DIR/go.mod"
    printf '%s' "$v"
}

JAEGER_VERSION="$(jaeger_version)"
JAEGER_BIN="$BIN_DIR/jaeger-$JAEGER_VERSION"
BUILD_MARKER="$JAEGER_BIN.fingerprint"
BUILD_LOG="$BIN_DIR/build-$JAEGER_VERSION.log"
SRC_DIR="$BIN_DIR/src-$JAEGER_VERSION"
WORK_FILE="$BIN_DIR/go-$JAEGER_VERSION.work"

# A fingerprint of what the binary was built from: the version, the module
# files (a changed go.sum, e.g. a bumped dependency, also triggers a rebuild)
# and the slim replacement files (names and contents).
build_fingerprint() {
    printf '%s\n' "$JAEGER_VERSION"
    sha256sum "$TOOL_DIR/go.mod" "$TOOL_DIR/go.sum" | cut -d' ' -f1
    (cd "$SLIM_DIR" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
}

# The slim source tree: Jaeger's own module source (from the module cache, as
# go.sum verifies it) copied to $SRC_DIR, with each file of $SLIM_DIR/*.go
# written over the upstream file at the same path. upstream.sha256 pins the
# upstream files being replaced: if a Jaeger bump changed one, the build stops
# here instead of silently dropping upstream's change.
prepare_slim_source() {
    local upstream
    upstream="$(cd "$TOOL_DIR" && GOWORK=off go mod download -json "$JAEGER_MODULE@$JAEGER_VERSION" |
        sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    [[ -n "$upstream" && -d "$upstream" ]] || die "go mod download $JAEGER_MODULE@$JAEGER_VERSION gave no source directory"
    local files
    files="$(cd "$SLIM_DIR" && find . -name '*.go' -type f | sed 's|^\./||' | LC_ALL=C sort)"
    [[ "$files" == "$(awk '{ print $2 }' "$SLIM_DIR/upstream.sha256" | LC_ALL=C sort)" ]] ||
        die "$SLIM_DIR/upstream.sha256 must list exactly the upstream files that $SLIM_DIR/**/*.go replace"
    (cd "$upstream" && sha256sum --quiet -c "$SLIM_DIR/upstream.sha256") >&2 ||
        die "the upstream files that $SLIM_DIR replaces differ from $SLIM_DIR/upstream.sha256 (a new Jaeger version?): review each replacement against the new upstream file, then refresh upstream.sha256 (see $TOOL_DIR/README.md)"
    rm -rf "$SRC_DIR"
    mkdir -p "$(dirname "$SRC_DIR")"
    cp -R "$upstream" "$SRC_DIR"
    chmod -R u+w "$SRC_DIR"
    local f
    while IFS= read -r f; do
        [[ -f "$SRC_DIR/$f" ]] || die "$SLIM_DIR/$f replaces no file of Jaeger $JAEGER_VERSION"
        cp "$SLIM_DIR/$f" "$SRC_DIR/$f"
    done <<<"$files"
    # A workspace of tests/tools/jaeger alone, with Jaeger's module replaced by
    # the slim tree: the same go.mod/go.sum pins every other module.
    local gover
    gover="$(awk '$1 == "go" { print $2; exit }' "$TOOL_DIR/go.mod")"
    cat >"$WORK_FILE" <<EOW
go $gover

use $TOOL_DIR

replace $JAEGER_MODULE $JAEGER_VERSION => $SRC_DIR
EOW
    rm -f "$WORK_FILE.sum"
}

built() {
    [[ -x "$JAEGER_BIN" && -f "$BUILD_MARKER" ]] &&
        [[ "$(cat "$BUILD_MARKER")" == "$(build_fingerprint)" ]]
}

cmd_build() {
    if built; then
        say "Jaeger $JAEGER_VERSION already built: $JAEGER_BIN"
        return 0
    fi
    command -v go >/dev/null 2>&1 || die "go not found on PATH (needed to build Jaeger from source)"
    mkdir -p "$BIN_DIR"
    # Serialise concurrent builds of the same version.
    exec 9>"$BIN_DIR/.build-$JAEGER_VERSION.lock"
    flock 9
    if built; then
        say "Jaeger $JAEGER_VERSION already built: $JAEGER_BIN"
        exec 9>&-
        return 0
    fi
    local t0 tmp
    t0="$(now)"
    tmp="$JAEGER_BIN.tmp.$$"
    say "building Jaeger $JAEGER_VERSION (slim: $SLIM_DIR) from source (minutes the first time on 2 cores; fast once the Go build cache is warm), log $BUILD_LOG"
    prepare_slim_source
    # -mod=readonly: build exactly what tests/tools/jaeger/go.mod pins, never
    # edit it. CGO_ENABLED=0: nothing here needs C, and a cold cache then
    # compiles no cgo. The build runs in the background so a heartbeat can keep
    # CI logs alive during the cold build.
    (cd "$TOOL_DIR" && GOWORK="$WORK_FILE" CGO_ENABLED=0 exec go build -mod=readonly -trimpath \
        -ldflags='-s -w' -o "$tmp" "$TOOL_PKG") >"$BUILD_LOG" 2>&1 &
    local bpid=$! rc=0 next=$(( t0 + 60 ))
    while kill -0 "$bpid" 2>/dev/null; do
        if (( $(now) >= next )); then
            say "still building Jaeger $JAEGER_VERSION ... $(( $(now) - t0 ))s"
            next=$(( next + 60 ))
        fi
        sleep 1
    done
    wait "$bpid" || rc=$?
    if (( rc != 0 )) || [[ ! -x "$tmp" ]]; then
        tail -n 50 "$BUILD_LOG" >&2 || true
        rm -f "$tmp"
        exec 9>&-
        die "go build of $TOOL_PKG@$JAEGER_VERSION failed (exit $rc, log above)"
    fi
    mv -f "$tmp" "$JAEGER_BIN"
    build_fingerprint >"$BUILD_MARKER"
    # The slim tree is only needed to build (kept after a failed build, to
    # look at); -trimpath keeps its path out of the Go build cache's keys.
    rm -rf "$SRC_DIR" "$WORK_FILE" "$WORK_FILE.sum"
    exec 9>&-
    say "built $JAEGER_BIN ($(du -h "$JAEGER_BIN" | cut -f1)) in $(( $(now) - t0 ))s"
}

tcp_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

query_url() { printf 'http://%s:%s' "$JAEGER_HOST" "$JAEGER_QUERY_PORT"; }

# The query API answers with JSON ({"data":[...],...}) and both OTLP
# receivers accept connections.
jaeger_probe() {
    local body
    body="$(curl -fsS --max-time 3 "$(query_url)/api/services" 2>/dev/null)" || return 1
    [[ "$body" == *'"data"'* ]] || return 1
    tcp_open "$JAEGER_HOST" "$JAEGER_OTLP_HTTP_PORT" || return 1
    tcp_open "$JAEGER_HOST" "$JAEGER_OTLP_GRPC_PORT" || return 1
}

print_endpoints() {
    printf 'JAEGER_QUERY=%s\n' "$(query_url)"
    printf 'JAEGER_OTLP_HTTP=%s:%s\n' "$JAEGER_HOST" "$JAEGER_OTLP_HTTP_PORT"
    printf 'JAEGER_OTLP_GRPC=%s:%s\n' "$JAEGER_HOST" "$JAEGER_OTLP_GRPC_PORT"
}

read_pid() {
    [[ -f "$PID_FILE" ]] || return 1
    local pid
    pid="$(tr -dc '0-9' <"$PID_FILE")"
    [[ -n "$pid" ]] || return 1
    printf '%s' "$pid"
}

# True if $1 is alive and is our Jaeger (guards against a recycled pid).
is_our_jaeger() {
    local pid="$1" cmdline
    [[ -r "/proc/$pid/cmdline" ]] || return 1
    cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
    [[ "$cmdline" == *"/jaeger-"* && "$cmdline" == *"$CONFIG_FILE"* ]]
}

running_pid() {
    local pid
    pid="$(read_pid)" || return 1
    is_our_jaeger "$pid" || return 1
    printf '%s' "$pid"
}

show_log_tail() {
    if [[ -f "$LOG_FILE" ]]; then
        say "last 50 lines of $LOG_FILE:"
        tail -n 50 "$LOG_FILE" >&2 || true
    else
        say "no $LOG_FILE"
    fi
}

cmd_stop() {
    local pid
    if ! pid="$(running_pid)"; then
        rm -f "$PID_FILE"
        say "no Jaeger running (data dir $JAEGER_DATA_DIR)"
        return 0
    fi
    say "stopping Jaeger pid $pid ..."
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$(( $(now) + JAEGER_STOP_TIMEOUT ))
    while kill -0 "$pid" 2>/dev/null; do
        if (( $(now) >= deadline )); then
            say "Jaeger pid $pid still alive after ${JAEGER_STOP_TIMEOUT}s; sending KILL"
            kill -KILL "$pid" 2>/dev/null || true
            local kdeadline=$(( $(now) + 10 ))
            while kill -0 "$pid" 2>/dev/null; do
                (( $(now) < kdeadline )) || die "Jaeger pid $pid survived SIGKILL"
                sleep 0.2
            done
            break
        fi
        sleep 0.2
    done
    rm -f "$PID_FILE"
    say "Jaeger stopped"
}

# Refuse to wipe a directory this script did not create.
wipe_data_dir() {
    local d="$JAEGER_DATA_DIR"
    [[ -n "$d" && "$d" != "/" && "$d" != "$HOME" ]] || die "refusing to use JAEGER_DATA_DIR='$d'"
    if [[ -e "$d" ]]; then
        [[ -d "$d" ]] || die "JAEGER_DATA_DIR $d exists and is not a directory"
        if [[ ! -f "$DATA_MARKER" ]] && [[ -n "$(ls -A "$d")" ]]; then
            die "JAEGER_DATA_DIR $d is not empty and was not created by jaeger.sh; refusing to wipe it"
        fi
        rm -rf "$d"
    fi
    mkdir -p "$d"
    : >"$DATA_MARKER"
}

# All-in-one with in-memory storage. Only the components listed under
# service: are started, and each listener is set explicitly to 127.0.0.1
# (Jaeger's built-in all-in-one config would also start the jaeger/zipkin
# receivers, remote sampling, health check, expvar, zpages and a Prometheus
# endpoint for its own metrics).
write_config() {
    cat >"$CONFIG_FILE" <<EOF
# Generated by tests/jaeger/jaeger.sh: Jaeger $JAEGER_VERSION all-in-one,
# in-memory storage, every listener on $JAEGER_HOST.
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    resource:
      service.name: jaeger
    metrics:
      level: none
    logs:
      level: $JAEGER_LOG_LEVEL

extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: $JAEGER_MAX_TRACES
  jaeger_query:
    storage:
      traces: memstore
    enable_tracing: false
    http:
      endpoint: $JAEGER_HOST:$JAEGER_QUERY_PORT
    grpc:
      endpoint: $JAEGER_HOST:$JAEGER_QUERY_GRPC_PORT

receivers:
  otlp:
    protocols:
      grpc:
        endpoint: $JAEGER_HOST:$JAEGER_OTLP_GRPC_PORT
      http:
        endpoint: $JAEGER_HOST:$JAEGER_OTLP_HTTP_PORT

processors:
  batch:

exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
EOF
}

cmd_start() {
    local t0
    t0="$(now)"
    command -v curl >/dev/null 2>&1 || die "curl not found on PATH (used to probe the query API)"
    cmd_build
    local pid
    if pid="$(running_pid)"; then
        if jaeger_probe; then
            say "Jaeger already running (pid $pid) and answering at $(query_url)"
            print_endpoints
            return 0
        fi
        say "Jaeger pid $pid from a previous start is not answering; stopping it first"
        cmd_stop
    fi
    local p
    for p in "$JAEGER_QUERY_PORT" "$JAEGER_QUERY_GRPC_PORT" "$JAEGER_OTLP_GRPC_PORT" "$JAEGER_OTLP_HTTP_PORT"; do
        if tcp_open "$JAEGER_HOST" "$p"; then
            die "port $JAEGER_HOST:$p is already in use (set JAEGER_QUERY_PORT / JAEGER_QUERY_GRPC_PORT / JAEGER_OTLP_GRPC_PORT / JAEGER_OTLP_HTTP_PORT)"
        fi
    done
    wipe_data_dir
    write_config

    say "starting Jaeger $JAEGER_VERSION (query $(query_url), OTLP grpc $JAEGER_HOST:$JAEGER_OTLP_GRPC_PORT http $JAEGER_HOST:$JAEGER_OTLP_HTTP_PORT), log $LOG_FILE"
    nohup "$JAEGER_BIN" --config "$CONFIG_FILE" >>"$LOG_FILE" 2>&1 </dev/null &
    pid=$!
    printf '%s\n' "$pid" >"$PID_FILE"

    local deadline=$(( $(now) + JAEGER_START_TIMEOUT ))
    while :; do
        if ! kill -0 "$pid" 2>/dev/null; then
            local rc=0
            wait "$pid" || rc=$?
            rm -f "$PID_FILE"
            show_log_tail
            die "Jaeger exited during startup (exit code $rc)"
        fi
        if jaeger_probe; then
            break
        fi
        if (( $(now) >= deadline )); then
            show_log_tail
            kill -KILL "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            rm -f "$PID_FILE"
            die "Jaeger not ready within ${JAEGER_START_TIMEOUT}s; killed it"
        fi
        sleep 0.3
    done
    say "Jaeger ready (pid $pid) after $(( $(now) - t0 ))s"
    print_endpoints
}

cmd_status() {
    local pid
    if ! pid="$(running_pid)"; then
        say "not running (data dir $JAEGER_DATA_DIR)"
        return 1
    fi
    if jaeger_probe; then
        say "running (pid $pid) and answering at $(query_url)"
        print_endpoints
        return 0
    fi
    say "Jaeger pid $pid running but not answering at $(query_url) / OTLP ports"
    return 1
}

usage() {
    cat >&2 <<EOF
usage: jaeger.sh build|start|stop|status
Jaeger $JAEGER_VERSION (from $TOOL_DIR/go.mod), binary $JAEGER_BIN
env: WASMSTREAM_CACHE=$CACHE_ROOT JAEGER_DATA_DIR=$JAEGER_DATA_DIR
     JAEGER_QUERY_PORT=$JAEGER_QUERY_PORT JAEGER_QUERY_GRPC_PORT=$JAEGER_QUERY_GRPC_PORT
     JAEGER_OTLP_GRPC_PORT=$JAEGER_OTLP_GRPC_PORT JAEGER_OTLP_HTTP_PORT=$JAEGER_OTLP_HTTP_PORT
     JAEGER_MAX_TRACES=$JAEGER_MAX_TRACES JAEGER_LOG_LEVEL=$JAEGER_LOG_LEVEL
     JAEGER_START_TIMEOUT=$JAEGER_START_TIMEOUT JAEGER_STOP_TIMEOUT=$JAEGER_STOP_TIMEOUT
EOF
}

main() {
    local cmd="${1:-}"
    [[ $# -gt 0 ]] && shift
    case "$cmd" in
        build) cmd_build ;;
        start) cmd_start ;;
        stop) cmd_stop ;;
        status) cmd_status ;;
        -h|--help|help) usage ;;
        *) usage; exit 2 ;;
    esac
}

main "$@"
