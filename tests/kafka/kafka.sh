#!/usr/bin/env bash
# Fetch Apache Kafka broker jars from Maven Central and run a real single-node
# KRaft broker (broker+controller in one JVM) on 127.0.0.1 for integration
# tests. See README.md next to this file.
#
#   kafka.sh fetch            jars -> $WASMSTREAM_CACHE/kafka-<version>/lib
#   kafka.sh start            fresh data dir, format, start, wait until ready;
#                             prints KAFKA_BROKERS=127.0.0.1:<port> on stdout
#   kafka.sh start --secure   the same with SASL_SSL and SSL listeners, test
#                             certificates and SCRAM users (secure.sh)
#   kafka.sh stop             TERM (then KILL after a deadline), idempotent
#   kafka.sh restart          stop, then start again on the same data
#   kafka.sh status           exit 0 iff running and answering Kafka requests
#   kafka.sh topics ARGS...   TopicCommand with --bootstrap-server filled in
#   kafka.sh tool CLASS ARGS  any Kafka CLI class on the fetched classpath
#   kafka.sh cluster 3 | kill N | stop-broker N | start-broker N | stop-cluster
#                             a 3-node cluster behind a fault proxy (cluster.sh)
#
# Every diagnostic goes to stderr prefixed "kafka.sh:"; stdout carries only
# KAFKA_BROKERS=... (start) and the output of topics/tool.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
POM="$SCRIPT_DIR/pom.xml"

KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
CACHE_ROOT="${WASMSTREAM_CACHE:-$HOME/.cache/wasmstream}"
KAFKA_HOME_DIR="$CACHE_ROOT/kafka-$KAFKA_VERSION"
LIB_DIR="$KAFKA_HOME_DIR/lib"
MARKER="$KAFKA_HOME_DIR/.fetch-complete"

KAFKA_DATA_DIR="${KAFKA_DATA_DIR:-/tmp/wasmstream-kafka}"
# The test services' fixed ports sit below Linux's ephemeral range
# (net.ipv4.ip_local_port_range, 32768-60999 by default), where the kernel
# picks the local port of every outgoing connection: a port in that range
# can be taken by some client's connection just before the broker binds it
# (a broker once failed to start that way). The blocks, all below 32768:
#   23092-23093  this broker (KAFKA_PORT, KAFKA_CONTROLLER_PORT)
#   23192-23196  the secured broker of tests/run.sh (secure.sh: +2..+4)
#   24101-24140  the 3-node cluster and its fault proxy (cluster.sh)
KAFKA_PORT="${KAFKA_PORT:-23092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-23093}"
KAFKA_HOST=127.0.0.1
KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-120}"
KAFKA_STOP_TIMEOUT="${KAFKA_STOP_TIMEOUT:-30}"
KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms256m -Xmx768m}"
KAFKA_JVM_OPTS="${KAFKA_JVM_OPTS:--XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true}"
KAFKA_EXTRA_PROPS="${KAFKA_EXTRA_PROPS:-}"
MVN_DEPENDENCY_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

PID_FILE="$KAFKA_DATA_DIR/broker.pid"
LOG_FILE="$KAFKA_DATA_DIR/broker.log"
PROPS_FILE="$KAFKA_DATA_DIR/server.properties"
DATA_MARKER="$KAFKA_DATA_DIR/.wasmstream-kafka-data"
BROKER_CLASS="kafka.Kafka"
STORAGE_TOOL_CLASS="kafka.tools.StorageTool"
TOPIC_TOOL_CLASS="org.apache.kafka.tools.TopicCommand"

SECURE=""             # start --secure: secure.sh is sourced
SECURE_FORMAT_ARGS=() # its SCRAM users, given to the storage format

log() { printf 'kafka.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

now() { date +%s; }

need_java() {
    command -v java >/dev/null 2>&1 || die "java not found on PATH (Kafka $KAFKA_VERSION needs Java 17+)"
    local v
    v="$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)"
    if [[ -n "$v" && "$v" -lt 17 ]]; then
        die "java $v found; Kafka $KAFKA_VERSION needs Java 17+"
    fi
}

# A fingerprint of what the cache was built from: the version and the pom.
fetch_fingerprint() {
    printf '%s\n' "$KAFKA_VERSION"
    sha256sum "$POM" | cut -d' ' -f1
}

fetched() {
    [[ -f "$MARKER" ]] && [[ "$(cat "$MARKER")" == "$(fetch_fingerprint)" ]] &&
        compgen -G "$LIB_DIR/kafka_2.13-$KAFKA_VERSION.jar" >/dev/null
}

cmd_fetch() {
    [[ -f "$POM" ]] || die "missing $POM"
    if fetched; then
        log "Kafka $KAFKA_VERSION jars already in $LIB_DIR"
        return 0
    fi
    command -v mvn >/dev/null 2>&1 || die "mvn not found on PATH (needed once to fetch Kafka jars from Maven Central)"
    mkdir -p "$KAFKA_HOME_DIR"
    # Serialise concurrent fetches of the same version.
    exec 9>"$KAFKA_HOME_DIR/.fetch.lock"
    flock 9
    if fetched; then
        log "Kafka $KAFKA_VERSION jars already in $LIB_DIR"
        exec 9>&-
        return 0
    fi
    local t0 work
    t0="$(now)"
    work="$(mktemp -d "$KAFKA_HOME_DIR/.fetch.XXXXXX")"
    # Run maven on a copy of the pom so nothing (target/ etc.) lands in the repo.
    cp "$POM" "$work/pom.xml"
    log "fetching Kafka $KAFKA_VERSION jars with maven into $LIB_DIR ..."
    local mvn_args=(-B -q -f "$work/pom.xml" "-Dkafka.version=$KAFKA_VERSION"
        "$MVN_DEPENDENCY_PLUGIN:copy-dependencies"
        -DincludeScope=runtime "-DoutputDirectory=$work/lib")
    if [[ -n "${KAFKA_M2_REPO:-}" ]]; then
        mvn_args+=("-Dmaven.repo.local=$KAFKA_M2_REPO")
    fi
    if ! mvn "${mvn_args[@]}" >"$work/mvn.log" 2>&1; then
        tail -n 50 "$work/mvn.log" >&2 || true
        rm -rf "$work"
        exec 9>&-
        die "maven could not fetch org.apache.kafka:kafka_2.13:$KAFKA_VERSION (log above)"
    fi
    [[ -f "$work/lib/kafka_2.13-$KAFKA_VERSION.jar" ]] || {
        rm -rf "$work"; exec 9>&-; die "maven finished but kafka_2.13-$KAFKA_VERSION.jar is missing"; }
    rm -rf "$LIB_DIR" "$MARKER"
    mv "$work/lib" "$LIB_DIR"
    rm -rf "$work"
    fetch_fingerprint >"$MARKER"
    exec 9>&-
    log "fetched $(ls "$LIB_DIR" | wc -l) jars ($(du -sh "$LIB_DIR" | cut -f1)) in $(( $(now) - t0 ))s"
}

classpath() { printf '%s/*' "$LIB_DIR"; }

# log4j2 config for the CLI tools: warnings only, to stderr.
tools_log4j() {
    local f="$KAFKA_HOME_DIR/tools-log4j2.properties"
    if [[ ! -f "$f" ]]; then
        cat >"$f.tmp.$$" <<'EOF'
status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
EOF
        mv "$f.tmp.$$" "$f"
    fi
    printf '%s' "$f"
}

run_tool() {
    local cls="$1"; shift
    java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \
        "-Dlog4j2.configurationFile=$(tools_log4j)" \
        -cp "$(classpath)" "$cls" "$@"
}

# Admin client settings so a probe fails fast instead of retrying for a minute.
probe_config() {
    local f="$KAFKA_HOME_DIR/probe-admin.properties"
    if [[ ! -f "$f" ]]; then
        cat >"$f.tmp.$$" <<'EOF'
request.timeout.ms=5000
default.api.timeout.ms=8000
socket.connection.setup.timeout.ms=2000
socket.connection.setup.timeout.max.ms=3000
reconnect.backoff.max.ms=500
retry.backoff.max.ms=500
EOF
        mv "$f.tmp.$$" "$f"
    fi
    printf '%s' "$f"
}

# A real Kafka request round trip: list topics through the admin client. This
# needs the broker registered, unfenced and serving metadata.
kafka_probe() {
    timeout 20 java -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \
        "-Dlog4j2.configurationFile=$(tools_log4j)" -cp "$(classpath)" \
        "$TOPIC_TOOL_CLASS" --bootstrap-server "$KAFKA_HOST:$KAFKA_PORT" \
        --command-config "$(probe_config)" --list >/dev/null 2>&1
}

tcp_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

read_pid() {
    [[ -f "$PID_FILE" ]] || return 1
    local pid
    pid="$(tr -dc '0-9' <"$PID_FILE")"
    [[ -n "$pid" ]] || return 1
    printf '%s' "$pid"
}

# True if $1 is alive and is our broker (guards against a recycled pid).
is_our_broker() {
    local pid="$1" cmdline
    [[ -r "/proc/$pid/cmdline" ]] || return 1
    cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
    [[ "$cmdline" == *"$BROKER_CLASS"* && "$cmdline" == *"$PROPS_FILE"* ]]
}

running_pid() {
    local pid
    pid="$(read_pid)" || return 1
    is_our_broker "$pid" || return 1
    printf '%s' "$pid"
}

show_log_tail() {
    if [[ -f "$LOG_FILE" ]]; then
        log "last 50 lines of $LOG_FILE:"
        tail -n 50 "$LOG_FILE" >&2 || true
    else
        log "no $LOG_FILE"
    fi
}

cmd_stop() {
    local pid
    if ! pid="$(running_pid)"; then
        rm -f "$PID_FILE"
        log "no broker running (data dir $KAFKA_DATA_DIR)"
        return 0
    fi
    log "stopping broker pid $pid ..."
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$(( $(now) + KAFKA_STOP_TIMEOUT ))
    while kill -0 "$pid" 2>/dev/null; do
        if (( $(now) >= deadline )); then
            log "broker pid $pid still alive after ${KAFKA_STOP_TIMEOUT}s; sending KILL"
            kill -KILL "$pid" 2>/dev/null || true
            local kdeadline=$(( $(now) + 10 ))
            while kill -0 "$pid" 2>/dev/null; do
                (( $(now) < kdeadline )) || die "broker pid $pid survived SIGKILL"
                sleep 0.2
            done
            break
        fi
        sleep 0.2
    done
    rm -f "$PID_FILE"
    log "broker stopped"
}

# Refuse to wipe a directory this script did not create.
wipe_data_dir() {
    local d="$KAFKA_DATA_DIR"
    [[ -n "$d" && "$d" != "/" && "$d" != "$HOME" ]] || die "refusing to use KAFKA_DATA_DIR='$d'"
    if [[ -e "$d" ]]; then
        [[ -d "$d" ]] || die "KAFKA_DATA_DIR $d exists and is not a directory"
        if [[ ! -f "$DATA_MARKER" ]] && [[ -n "$(ls -A "$d")" ]]; then
            die "KAFKA_DATA_DIR $d is not empty and was not created by kafka.sh; refusing to wipe it"
        fi
        rm -rf "$d"
    fi
    mkdir -p "$d/logs"
    : >"$DATA_MARKER"
}

random_cluster_id() {
    # Kafka cluster ids are 16 random bytes, URL-safe base64 without padding.
    # Re-draw ids starting with '-': StorageTool's parser takes those for options.
    local id
    while :; do
        id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
        [[ "$id" == -* ]] || break
    done
    printf '%s' "$id"
}

write_config() {
    cat >"$PROPS_FILE" <<EOF
# Generated by tests/kafka/kafka.sh: single-node KRaft broker for tests.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$KAFKA_HOST:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://$KAFKA_HOST:$KAFKA_PORT,CONTROLLER://$KAFKA_HOST:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$KAFKA_HOST:$KAFKA_PORT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$KAFKA_DATA_DIR/logs

# Tests create their own topics.
auto.create.topics.enable=false
num.partitions=1
default.replication.factor=1

# Single node: internal topics with one replica.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=8
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1

# Share groups (KIP-932): a fresh 4.4 format enables share.version already.
# Tests give a group a lock of a few seconds (the group config
# share.record.lock.duration.ms), which the broker refuses below this floor
# (15 s by default).
group.share.min.record.lock.duration.ms=1000

# No 3 s wait before the first rebalance of a new group.
group.initial.rebalance.delay.ms=0
EOF
    if [[ -n "$KAFKA_EXTRA_PROPS" ]]; then
        printf '\n# From KAFKA_EXTRA_PROPS\n%s\n' "$KAFKA_EXTRA_PROPS" >>"$PROPS_FILE"
    fi
    cat >"$KAFKA_DATA_DIR/log4j2.properties" <<'EOF'
status = warn
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.zk.name = org.apache.zookeeper
logger.zk.level = warn
EOF
}

cmd_start() {
    local t0
    t0="$(now)"
    need_java
    cmd_fetch
    if running_pid >/dev/null; then
        log "a broker from a previous start is running; stopping it first"
        cmd_stop
    fi
    local p
    for p in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
        if tcp_open "$KAFKA_HOST" "$p"; then
            die "port $KAFKA_HOST:$p is already in use (set KAFKA_PORT / KAFKA_CONTROLLER_PORT)"
        fi
    done
    wipe_data_dir
    write_config
    if [[ -n "$SECURE" ]]; then
        secure_certs
        secure_config
        secure_format_args
    fi

    local cluster_id
    cluster_id="$(random_cluster_id)"
    log "formatting storage in $KAFKA_DATA_DIR/logs (cluster id $cluster_id)"
    if ! java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
        "-Dlog4j2.configurationFile=$KAFKA_DATA_DIR/log4j2.properties" \
        -cp "$(classpath)" "$STORAGE_TOOL_CLASS" format \
        -t "$cluster_id" -c "$PROPS_FILE" "${SECURE_FORMAT_ARGS[@]}" >>"$LOG_FILE" 2>&1; then
        show_log_tail
        die "storage format failed"
    fi

    launch_broker "$t0"
}

# launch_broker starts the broker on the formatted data dir and waits until
# it answers; $1 is when the command started (for the log line).
launch_broker() {
    local t0="$1"
    log "starting broker on $KAFKA_HOST:$KAFKA_PORT (controller $KAFKA_HOST:$KAFKA_CONTROLLER_PORT), log $LOG_FILE"
    # shellcheck disable=SC2086 # word splitting of the *_OPTS strings is intended
    nohup java $KAFKA_HEAP_OPTS $KAFKA_JVM_OPTS \
        "-Dlog4j2.configurationFile=$KAFKA_DATA_DIR/log4j2.properties" \
        "-Dkafka.logs.dir=$KAFKA_DATA_DIR" \
        -cp "$(classpath)" "$BROKER_CLASS" "$PROPS_FILE" \
        >>"$LOG_FILE" 2>&1 </dev/null &
    local pid=$!
    printf '%s\n' "$pid" >"$PID_FILE"

    local deadline=$(( $(now) + KAFKA_START_TIMEOUT ))
    # 1) wait for the listener socket (cheap), 2) a real admin request.
    while :; do
        if ! kill -0 "$pid" 2>/dev/null; then
            local rc=0
            wait "$pid" || rc=$?
            rm -f "$PID_FILE"
            show_log_tail
            die "broker exited during startup (exit code $rc)"
        fi
        if tcp_open "$KAFKA_HOST" "$KAFKA_PORT" && kafka_probe; then
            break
        fi
        if (( $(now) >= deadline )); then
            show_log_tail
            kill -KILL "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            rm -f "$PID_FILE"
            die "broker not ready within ${KAFKA_START_TIMEOUT}s; killed it"
        fi
        sleep 0.5
    done
    log "broker ready (pid $pid) after $(( $(now) - t0 ))s"
    printf 'KAFKA_BROKERS=%s:%s\n' "$KAFKA_HOST" "$KAFKA_PORT"
    [[ -z "$SECURE" ]] || secure_print
}

# cmd_restart stops the broker and starts it again on the same data (topics,
# records, committed offsets and transactions survive), as an operator's
# rolling restart would.
cmd_restart() {
    local t0
    t0="$(now)"
    need_java
    [[ -f "$DATA_MARKER" && -f "$PROPS_FILE" ]] || die "no broker data in $KAFKA_DATA_DIR to restart (run kafka.sh start first)"
    cmd_stop
    launch_broker "$t0"
}

cmd_status() {
    local pid
    if ! pid="$(running_pid)"; then
        log "not running (data dir $KAFKA_DATA_DIR)"
        return 1
    fi
    if ! fetched; then
        log "broker pid $pid running but Kafka jars for $KAFKA_VERSION are not fetched; cannot probe"
        return 1
    fi
    if kafka_probe; then
        log "running (pid $pid) and reachable at $KAFKA_HOST:$KAFKA_PORT"
        printf 'KAFKA_BROKERS=%s:%s\n' "$KAFKA_HOST" "$KAFKA_PORT"
        return 0
    fi
    log "broker pid $pid running but not answering at $KAFKA_HOST:$KAFKA_PORT"
    return 1
}

cmd_tool() {
    [[ $# -ge 1 ]] || die "usage: kafka.sh tool <main class> [args...]"
    fetched || cmd_fetch
    run_tool "$@"
}

cmd_topics() {
    fetched || cmd_fetch
    run_tool "$TOPIC_TOOL_CLASS" --bootstrap-server "$KAFKA_HOST:$KAFKA_PORT" "$@"
}

usage() {
    cat >&2 <<EOF
usage: kafka.sh fetch|start [--secure]|stop|restart|status|topics ARGS...|tool CLASS ARGS...
       kafka.sh cluster [N]|kill N|stop-broker N|start-broker N|stop-cluster
env: KAFKA_VERSION=$KAFKA_VERSION WASMSTREAM_CACHE=$CACHE_ROOT
     KAFKA_DATA_DIR=$KAFKA_DATA_DIR KAFKA_PORT=$KAFKA_PORT KAFKA_CONTROLLER_PORT=$KAFKA_CONTROLLER_PORT
     KAFKA_START_TIMEOUT=$KAFKA_START_TIMEOUT KAFKA_STOP_TIMEOUT=$KAFKA_STOP_TIMEOUT
     KAFKA_HEAP_OPTS KAFKA_JVM_OPTS KAFKA_EXTRA_PROPS KAFKA_M2_REPO
EOF
}

main() {
    local cmd="${1:-}"
    [[ $# -gt 0 ]] && shift
    case "$cmd" in
        fetch) cmd_fetch ;;
        start)
            if [[ "${1:-}" == --secure ]]; then
                SECURE=1
                # shellcheck source=secure.sh
                source "$SCRIPT_DIR/secure.sh"
            fi
            cmd_start ;;
        stop) cmd_stop ;;
        restart) cmd_restart ;;
        status) cmd_status ;;
        topics) cmd_topics "$@" ;;
        tool) cmd_tool "$@" ;;
        cluster|kill|stop-broker|start-broker|stop-cluster)
            # shellcheck source=cluster.sh
            source "$SCRIPT_DIR/cluster.sh"
            cluster_main "$cmd" "$@" ;;
        -h|--help|help) usage ;;
        *) usage; exit 2 ;;
    esac
}

main "$@"
