#!/usr/bin/env bash
# Fetch Apicurio Registry from Maven Central and run it on 127.0.0.1 for the
# schema-registry integration tests (its Confluent-compatible API,
# /apis/ccompat/v7, in-memory storage: every start is empty).
#
#   apicurio.sh fetch    io.apicurio:apicurio-registry-app:$APICURIO_VERSION:tar.gz:all
#                        -> $WASMSTREAM_CACHE/apicurio-<version> (cached)
#   apicurio.sh start    start, wait until /apis/ccompat/v7/subjects answers;
#                        prints SCHEMA_REGISTRY_URL=http://127.0.0.1:<port>/apis/ccompat/v7
#   apicurio.sh stop     TERM (then KILL after a deadline), idempotent
#   apicurio.sh status   exit 0 iff running and answering
#
# APICURIO_SECURE=1 (opt-in; the default serves plain http as above) starts
# it as a production registry is reached: https only, on APICURIO_PORT, with a
# certificate of a private CA made at each start (tests/schemareg/testca,
# crypto/x509; valid for 127.0.0.1 only) in $APICURIO_DATA_DIR/tls, and HTTP
# basic auth of one user (Quarkus' embedded users, which Apicurio's own
# authorization takes when quarkus.http.auth.basic is on: no identity
# server) whose random password is written to $APICURIO_DATA_DIR/tls/password
# (mode 0600; it is on the JVM's command line too: a test password). start
# then prints SCHEMA_REGISTRY_SECURE_URL=https://127.0.0.1:<port>/apis/ccompat/v7,
# SCHEMA_REGISTRY_SECURE_CA_FILE, SCHEMA_REGISTRY_SECURE_USER and
# SCHEMA_REGISTRY_SECURE_PASSWORD_FILE instead. Basic auth covers the whole
# instance (Apicurio's authorization is not per port or path), hence an
# instance of its own beside the plain one.
#
# Apicurio 3.x is built for Java 21: the script takes JAVA21_HOME, else the
# newest /usr/lib/jvm/temurin-* (or any JDK there) of version 21 or more, and
# fails naming what is missing. Diagnostics go to stderr prefixed
# "apicurio.sh:"; stdout carries only the SCHEMA_REGISTRY_*=... lines (start).
set -euo pipefail

APICURIO_VERSION="${APICURIO_VERSION:-3.3.3}"
CACHE_ROOT="${WASMSTREAM_CACHE:-$HOME/.cache/wasmstream}"
HOME_DIR="$CACHE_ROOT/apicurio-$APICURIO_VERSION"
MARKER="$HOME_DIR/.fetch-complete"
# Fixed ports below the ephemeral range (see tests/kafka/kafka.sh): 23481
# the API, 23482 the management interface.
APICURIO_PORT="${APICURIO_PORT:-23481}"
APICURIO_MANAGEMENT_PORT="${APICURIO_MANAGEMENT_PORT:-23482}"
APICURIO_DATA_DIR="${APICURIO_DATA_DIR:-/tmp/wasmstream-apicurio}"
APICURIO_START_TIMEOUT="${APICURIO_START_TIMEOUT:-120}"
APICURIO_STOP_TIMEOUT="${APICURIO_STOP_TIMEOUT:-30}"
APICURIO_HEAP_OPTS="${APICURIO_HEAP_OPTS:--Xms64m -Xmx512m}"
PID_FILE="$APICURIO_DATA_DIR/apicurio.pid"
LOG_FILE="$APICURIO_DATA_DIR/apicurio.log"
APICURIO_SECURE="${APICURIO_SECURE:-}"
APICURIO_USER="${APICURIO_USER:-wasmstream}"
TLS_DIR="$APICURIO_DATA_DIR/tls"
REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ -n "$APICURIO_SECURE" ]]; then
    URL="https://127.0.0.1:$APICURIO_PORT/apis/ccompat/v7"
else
    URL="http://127.0.0.1:$APICURIO_PORT/apis/ccompat/v7"
fi

log() { printf 'apicurio.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

java_version() { "$1/bin/java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1; }

# find_java prints a JDK home of Java 21+.
find_java() {
    if [[ -n "${JAVA21_HOME:-}" ]]; then
        [[ -x "$JAVA21_HOME/bin/java" ]] || die "JAVA21_HOME=$JAVA21_HOME has no bin/java"
        local v; v="$(java_version "$JAVA21_HOME")"
        [[ -n "$v" && "$v" -ge 21 ]] || die "JAVA21_HOME=$JAVA21_HOME is Java ${v:-?}; Apicurio $APICURIO_VERSION needs Java 21+"
        printf '%s\n' "$JAVA21_HOME"; return
    fi
    local d v seen=()
    for d in $(ls -d /usr/lib/jvm/temurin-* 2>/dev/null | sort -rV) $(ls -d /usr/lib/jvm/* 2>/dev/null | sort -rV); do
        [[ -x "$d/bin/java" ]] || continue
        v="$(java_version "$d")"
        seen+=("$d (Java ${v:-?})")
        if [[ -n "$v" && "$v" -ge 21 ]]; then printf '%s\n' "$d"; return; fi
    done
    die "no Java 21+ found for Apicurio $APICURIO_VERSION (its classes are version 65): set JAVA21_HOME, or install a JDK 21+ under /usr/lib/jvm (a Temurin 25 JDK is there on the project's machines); found: ${seen[*]:-none}"
}

cmd_fetch() {
    [[ -f "$MARKER" ]] && return 0
    # Two starts at once (the test command starts a plain and a secure
    # registry) fetch once: the second waits on the lock for the first.
    # The descriptor is closed before the JVM starts, which would hold it.
    mkdir -p "$CACHE_ROOT"
    exec 9>"$HOME_DIR.lock"
    flock 9
    if [[ ! -f "$MARKER" ]]; then fetch_locked; fi
    flock -u 9
    exec 9>&-
}

fetch_locked() {
    command -v mvn >/dev/null 2>&1 || die "mvn not found on PATH (it fetches Apicurio from Maven Central)"
    local artifact="io.apicurio:apicurio-registry-app:$APICURIO_VERSION:tar.gz:all"
    log "fetching $artifact"
    mvn -q dependency:get -Dartifact="$artifact" -Dtransitive=false >&2 || die "mvn could not fetch $artifact"
    local repo tgz
    repo="$(mvn -q help:evaluate -Dexpression=settings.localRepository -DforceStdout 2>/dev/null || true)"
    [[ -n "$repo" && -d "$repo" ]] || repo="$HOME/.m2/repository"
    tgz="$repo/io/apicurio/apicurio-registry-app/$APICURIO_VERSION/apicurio-registry-app-$APICURIO_VERSION-all.tar.gz"
    [[ -f "$tgz" ]] || die "fetched, but $tgz is not there"
    rm -rf "$HOME_DIR.tmp" && mkdir -p "$HOME_DIR.tmp"
    tar -xzf "$tgz" -C "$HOME_DIR.tmp"
    local run; run="$(find "$HOME_DIR.tmp" -name quarkus-run.jar | head -n1)"
    [[ -n "$run" ]] || die "$tgz holds no quarkus-run.jar"
    rm -rf "$HOME_DIR" && mv "$(dirname "$run")" "$HOME_DIR" && rm -rf "$HOME_DIR.tmp"
    touch "$MARKER"
    log "unpacked into $HOME_DIR"
}

running_pid() {
    [[ -f "$PID_FILE" ]] || return 1
    local pid; pid="$(cat "$PID_FILE")"
    kill -0 "$pid" 2>/dev/null || return 1
    printf '%s\n' "$pid"
}

answers() {
    if [[ -n "$APICURIO_SECURE" ]]; then
        [[ -f "$TLS_DIR/ca.pem" && -f "$TLS_DIR/password" ]] || return 1
        curl -fsS --max-time 2 --cacert "$TLS_DIR/ca.pem" -u "$APICURIO_USER:$(cat "$TLS_DIR/password")" "$URL/subjects" >/dev/null 2>&1
    else
        curl -fsS --max-time 2 "$URL/subjects" >/dev/null 2>&1
    fi
}

# print_env prints what a test needs to reach the registry.
print_env() {
    if [[ -n "$APICURIO_SECURE" ]]; then
        printf 'SCHEMA_REGISTRY_SECURE_URL=%s\nSCHEMA_REGISTRY_SECURE_CA_FILE=%s\nSCHEMA_REGISTRY_SECURE_USER=%s\nSCHEMA_REGISTRY_SECURE_PASSWORD_FILE=%s\n' \
            "$URL" "$TLS_DIR/ca.pem" "$APICURIO_USER" "$TLS_DIR/password"
    else
        printf 'SCHEMA_REGISTRY_URL=%s\n' "$URL"
    fi
}

# secure_opts makes the CA, the server's certificate and the password,
# and prints the JVM options that serve https only with basic auth.
secure_opts() {
    command -v go >/dev/null 2>&1 || die "go not found on PATH (APICURIO_SECURE makes its certificates with tests/schemareg/testca)"
    rm -rf "$TLS_DIR" && mkdir -p "$TLS_DIR"
    (cd "$REPO_DIR" && go run ./tests/schemareg/testca -dir "$TLS_DIR" -hosts 127.0.0.1) >&2 || die "tests/schemareg/testca could not make the certificates"
    (umask 077 && head -c 18 /dev/urandom | base64 | tr -d '/+=\n' >"$TLS_DIR/password")
    printf '%s\n' -Dquarkus.http.ssl-port="$APICURIO_PORT" -Dquarkus.http.insecure-requests=disabled \
        -Dquarkus.http.ssl.certificate.files="$TLS_DIR/server.pem" \
        -Dquarkus.http.ssl.certificate.key-files="$TLS_DIR/server-key.pem" \
        -Dquarkus.http.auth.basic=true -Dquarkus.security.users.embedded.plain-text=true \
        -Dquarkus.security.users.embedded.users."$APICURIO_USER"="$(cat "$TLS_DIR/password")"
}

cmd_start() {
    cmd_fetch
    if running_pid >/dev/null && answers; then
        log "already running"; print_env; return 0
    fi
    local jhome; jhome="$(find_java)"
    mkdir -p "$APICURIO_DATA_DIR"
    if answers; then die "something else answers on 127.0.0.1:$APICURIO_PORT"; fi
    local extra=()
    if [[ -n "$APICURIO_SECURE" ]]; then mapfile -t extra < <(secure_opts) && ((${#extra[@]})) || die "no TLS options"; fi
    log "starting Apicurio $APICURIO_VERSION with $jhome on ${URL%/apis/*}"
    # setsid: the registry outlives this script (the test command stops
    # it); every descriptor goes to the log, so no caller's pipe is held.
    (cd "$HOME_DIR" && exec setsid "$jhome/bin/java" $APICURIO_HEAP_OPTS \
        -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$APICURIO_PORT" \
        -Dquarkus.management.host=127.0.0.1 -Dquarkus.management.port="$APICURIO_MANAGEMENT_PORT" \
        "${extra[@]}" -jar quarkus-run.jar) >"$LOG_FILE" 2>&1 </dev/null &
    echo $! >"$PID_FILE"
    local deadline=$(( $(date +%s) + APICURIO_START_TIMEOUT ))
    until answers; do
        running_pid >/dev/null || { tail -n 30 "$LOG_FILE" >&2; die "Apicurio exited during start (log: $LOG_FILE)"; }
        (( $(date +%s) < deadline )) || { tail -n 30 "$LOG_FILE" >&2; cmd_stop; die "Apicurio did not answer within ${APICURIO_START_TIMEOUT}s"; }
        sleep 0.5
    done
    log "ready"
    print_env
}

cmd_stop() {
    local pid
    pid="$(running_pid)" || { rm -f "$PID_FILE"; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$(( $(date +%s) + APICURIO_STOP_TIMEOUT ))
    while kill -0 "$pid" 2>/dev/null; do
        if (( $(date +%s) >= deadline )); then kill -KILL "$pid" 2>/dev/null || true; break; fi
        sleep 0.2
    done
    rm -f "$PID_FILE"
    log "stopped"
}

cmd_status() { running_pid >/dev/null && answers; }

case "${1:-}" in
    fetch) cmd_fetch ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    *) die "usage: apicurio.sh fetch|start|stop|status" ;;
esac
