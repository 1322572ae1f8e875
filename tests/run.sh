#!/usr/bin/env bash
# The test command (`make test`): installs what the tests need when it is
# missing, builds the example processors, starts a real Kafka broker
# (tests/kafka/kafka.sh) and, for the test run, a secured broker, a 3-node
# cluster behind a fault proxy for the fault tests (tests/kafka/cluster.sh),
# a real schema registry (tests/schemareg/apicurio.sh) and a second one
# with TLS of a private CA and basic auth (APICURIO_SECURE=1),
# and a real Jaeger built from source (tests/jaeger/jaeger.sh: slimmed to the
# OTLP receiver, memory storage and query API, a few minutes the first time on
# a new machine, in the background while the first steps run) —
# the run fails if any cannot start — runs every test under the race
# detector, stops them, and prints the time each step took.
#
#   bash tests/run.sh          unit + integration tests, and the benchmark smoke run
#   bash tests/run.sh bench    the full benchmark suite on the real broker
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mode="${1:-test}"

say() { printf '== %s\n' "$*" >&2; }

# Steps and their times: step NAME ends the step running and starts NAME; at
# exit the table of every step's seconds is printed (where a run's time goes).
step_names=() step_secs=() step_now="" step_t0=$SECONDS
step() {
    [[ -z "$step_now" ]] || { step_names+=("$step_now"); step_secs+=($((SECONDS - step_t0))); }
    step_now="$1" step_t0=$SECONDS
    [[ -z "$1" ]] || say "$1"
}
step_table() {
    step ""
    local i
    printf '== time per step (s)\n' >&2
    for i in "${!step_names[@]}"; do printf '%6d  %s\n' "${step_secs[$i]}" "${step_names[$i]}" >&2; done
    printf '%6d  total\n' "$SECONDS" >&2
}
# The failing tests, each with its last messages, from the test logs in
# test_logs: printed at the end of the run, beside the step table, where a
# cut of the output still shows them (a failing test's messages are
# otherwise above its process logs, in the middle of the output).
test_logs=()
failure_summary() {
    local logs=() f
    for f in "${test_logs[@]}"; do [[ -s "$f" ]] && logs+=("$f"); done
    ((${#logs[@]})) && grep -q -- '--- FAIL' "${logs[@]}" || return 0
    printf '== failing tests, each with its last 8 messages (in full above)\n' >&2
    awk '
        function flush(   i) {
            if (head == "") return
            print head
            for (i = (n > 8 ? n - 8 : 0); i < n; i++) print msg[i % 8]
            head = ""
        }
        /^[[:space:]]*--- FAIL/ { flush(); head = $0; n = 0; next }
        head != "" && /^[[:space:]]+[A-Za-z0-9_.-]+_test\.go:[0-9]+: / { msg[n % 8] = substr($0, 1, 400); n++; next }
        /^(FAIL|ok|PASS)([[:space:]]|$)/ { flush() }
        END { flush() }' "${logs[@]}" >&2
}
# What runs at exit, newest first: services stopped, then the failing
# tests and the step table.
on_exit=()
at_exit() { on_exit=("$1" "${on_exit[@]}"); }
run_exit() {
    local rc=$? c
    for c in "${on_exit[@]}"; do eval "$c" || true; done
    failure_summary
    step_table
    exit "$rc"
}
trap run_exit EXIT

install_prereqs() {
    local pkgs=()
    command -v java >/dev/null 2>&1 || pkgs+=(openjdk-17-jre-headless)
    # javac: the Java peers of the benchmarks (tests/peers) are compiled here.
    command -v javac >/dev/null 2>&1 || pkgs+=(openjdk-17-jdk-headless)
    command -v mvn >/dev/null 2>&1 || pkgs+=(maven)
    command -v make >/dev/null 2>&1 || pkgs+=(make)
    command -v curl >/dev/null 2>&1 || pkgs+=(curl)
    # The C example guest (plugins/examples/c-uppercase) is built with clang for wasm32-wasi.
    command -v clang >/dev/null 2>&1 || pkgs+=(clang)
    command -v wasm-ld >/dev/null 2>&1 || pkgs+=(lld)
    [[ -d /usr/share/wasi-sysroot || -d /usr/lib/wasm32-wasi ]] || pkgs+=(wasi-libc)
    ls /usr/lib/llvm-14/lib/clang/14*/lib/wasi/libclang_rt.builtins-wasm32.a >/dev/null 2>&1 || pkgs+=(libclang-rt-14-dev-wasm32)
    # The host's C headers and libc, for clang beside its wasm32 target.
    [[ -f /usr/include/stdio.h ]] || pkgs+=(libc6-dev)
    # The Rust SDK and examples (abi/sdk/rust, plugins/examples/rust-*): Debian's
    # Rust with the wasm32-wasi standard library (rustup cannot download
    # targets on every machine; Debian's packages need no network but apt).
    [[ -x /usr/bin/rustc ]] || pkgs+=(rustc)
    [[ -x /usr/bin/cargo ]] || pkgs+=(cargo)
    [[ -d /usr/lib/rustlib/wasm32-wasi/lib ]] || pkgs+=(libstd-rust-dev-wasm32)
    # A rustup toolchain builds them first (abi/sdk/rust/wasm-target.sh), with
    # its wasm32-wasip1 target; Debian's is the fallback when that download fails.
    if command -v rustup >/dev/null 2>&1; then rustup target add wasm32-wasip1 >/dev/null 2>&1 || true; fi
    # wat2wasm: hand-written test modules (host/internal/meter/testdata/*.wat).
    command -v wat2wasm >/dev/null 2>&1 || pkgs+=(wabt)
    # node and npm: the AssemblyScript SDK (abi/sdk/assemblyscript) and its
    # examples (plugins/examples/as-*) are compiled with asc, an npm package.
    command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
    command -v npm >/dev/null 2>&1 || pkgs+=(npm)
    # chromium: the dashboard's browser test (tests/integration/dashboard_test.go)
    # drives Debian's chromium headless through chromedp.
    command -v chromium >/dev/null 2>&1 || pkgs+=(chromium)
    # python3: Confluent's Python client and serializers, for the interop
    # test (tests/interop/setup.sh installs them into a cached venv).
    command -v python3 >/dev/null 2>&1 || pkgs+=(python3 python3-venv python3-pip)
    if ((${#pkgs[@]})); then
        say "installing ${pkgs[*]}"
        if [[ $(id -u) -ne 0 ]]; then
            echo "tests/run.sh: need ${pkgs[*]} (run as root, or install them)" >&2
            exit 1
        fi
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
    fi
    command -v go >/dev/null 2>&1 || { echo "tests/run.sh: go is not installed" >&2; exit 1; }
    # AssemblyScript 0.28 needs Node 20 or later (Debian 12's own nodejs is 18:
    # install Node from NodeSource or nodejs.org there).
    node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' ||
        { echo "tests/run.sh: node $(node --version) is too old for AssemblyScript 0.28 (needs >= 20)" >&2; exit 1; }
}

# The race detector's flags for the test run. wazero's optimizing compiler
# (its SSA, frontend and backend passes: wasm in, machine code out, one
# function at a time) is built without the race instrumentation: compiling
# the Go example guests through it under the detector cost 5-8x the CPU and
# most of the unit tests' time (RATIONALE.md, "The race detector and wazero's
# compiler"). Everything else — wasmstream, franz-go, the rest of wazero — is
# instrumented.
wazevo=github.com/tetratelabs/wazero/internal/engine/wazevo
race=(-race "-gcflags=$wazevo/backend/...=-race=false" "-gcflags=$wazevo/frontend=-race=false" "-gcflags=$wazevo/ssa/...=-race=false")

# The unit step's packages (all but the integration tests) run in two
# lanes, each one package at a time: the first lane from the start; the
# second after the work that runs beside the first (the benchmark smoke
# run, the fuzz targets, cargo test), once that ends (it took about half of
# the step, and a core was idle for the rest). unit_pkgs lists a lane's
# packages: 2 is those below (about a third of the first lane's time under
# -race in CI; none measures a speed, their deadlines are waits), 1 the
# others. Two packages at a time from the start (-p 2) put three busy
# processes on the two cores for the first half, and timing-bound tests
# failed.
lane2=(cmd/wasmstream internal/conformance tests/sdkserde internal/schemareg/protocodec internal/schemareg/avrocodec)
unit_pkgs() {
    local m=github.com/wasmstream/wasmstream
    go list -tags integration ./... | grep -v '/tests/integration$' |
        if [[ $1 == 2 ]]; then grep -xF -f <(printf "$m/%s\n" "${lane2[@]}"); else grep -vxF -f <(printf "$m/%s\n" "${lane2[@]}"); fi
}

step "installing what the tests need"
install_prereqs
if [[ "$mode" == test ]]; then
    # Jaeger is built from source (slim, tests/tools/jaeger/README.md: a few
    # minutes on a new machine, seconds once built): in the background from
    # here, so the build overlaps the steps below; "starting a real Jaeger"
    # waits for it and fails if it failed.
    mkdir -p /tmp/wasmstream-jaeger-build
    bash tests/jaeger/jaeger.sh build >/tmp/wasmstream-jaeger-build/build.log 2>&1 &
    jaeger_build=$!
    at_exit 'kill $jaeger_build 2>/dev/null'
    # Confluent's Python client and its Avro, Protobuf and JSON Schema
    # serializers, for the interop test (tests/integration/schema_interop_test.go):
    # a venv under the cache, installed once (seconds), reused after.
    # (Its status is checked here: eval of a failed substitution succeeds.)
    interop_env="$(bash tests/interop/setup.sh)" || { echo "tests/run.sh: Confluent's Python client could not be installed (tests/interop/setup.sh, above)" >&2; exit 1; }
    eval "$interop_env"
    export INTEROP_PYTHON
fi
step "gofmt and go vet"
unformatted="$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*'))"
[[ -z "$unformatted" ]] || { echo "tests/run.sh: not gofmt-formatted:" >&2; echo "$unformatted" >&2; exit 1; }
go vet ./...
go vet -tags integration ./tests/...
# The Go SDK and the examples as guests are built: vetted as they are built.
GOOS=wasip1 GOARCH=wasm go vet ./abi/... ./plugins/examples/...
step "building the CLI and the example processors"
make -s build plugins
# The packages the race run links, compiled here with both cores (that run
# takes one package at a time).
go build "${race[@]}" -tags integration ./...
# The deployment recipes (deploy/): manifests decoded strictly into the
# Kubernetes types, the ConfigMap's config loaded, the unit file verified.
# A module of its own (k8s.io stays out of the main module); under a second.
step "deployment recipes (deploy/check)"
(cd deploy/check && go vet ./... && go test -count=1 ./...)

# The AssemblyScript SDK: its pinned compiler from package-lock.json (npm ci;
# the cache in ~/.npm lets a later run work offline) and its own tests, in
# Node's WebAssembly engine; then the examples, which host/asguest_test.go
# runs in the host and the meter's TestInstrumentExamples instruments.
step "AssemblyScript SDK: npm ci and npm test"
make -s as-sdk-test as-plugins

step "starting a real Kafka broker"
eval "$(bash tests/kafka/kafka.sh start)"
export KAFKA_BROKERS
at_exit 'bash tests/kafka/kafka.sh stop'
say "Kafka at $KAFKA_BROKERS"

case "$mode" in
test)
    # A second, secured broker (SASL_SSL, SSL with client certificates,
    # StandardAuthorizer; tests/kafka/secure.sh) for the secured-cluster
    # tests: one small JVM, its PLAINTEXT address as KAFKA_SECURE_BROKERS.
    step "starting a secured Kafka broker"
    # Its ports, 23192-23196 (secure.sh adds +2..+4 to KAFKA_PORT), are
    # below Linux's ephemeral range like the other brokers' (tests/kafka/kafka.sh).
    secure_kafka() {
        KAFKA_DATA_DIR=/tmp/wasmstream-kafka-secure KAFKA_PORT=23192 KAFKA_CONTROLLER_PORT=23193 \
            KAFKA_HEAP_OPTS="-Xms128m -Xmx384m" bash tests/kafka/kafka.sh "$@"
    }
    eval "$(secure_kafka start --secure | sed 's/^KAFKA_BROKERS=/KAFKA_SECURE_BROKERS=/')"
    export KAFKA_SECURE_BROKERS KAFKA_SASL_SSL_BROKERS KAFKA_SSL_BROKERS KAFKA_PLAIN_ONLY_BROKERS KAFKA_SECURE_DIR
    at_exit 'secure_kafka stop'
    say "secured Kafka at $KAFKA_SASL_SSL_BROKERS (SASL_SSL), $KAFKA_SSL_BROKERS (SSL), CA $KAFKA_SECURE_DIR/ca.pem"
    # A real schema registry (Apicurio Registry, its Confluent-compatible
    # API; Java 21+: tests/schemareg/apicurio.sh finds the JDK and fails
    # naming what is missing) for tests/schemareg: started in the background
    # here, awaited before the unit packages run.
    step "starting a real schema registry (Apicurio, in the background)"
    apicurio_env=/tmp/wasmstream-apicurio.env apicurio_log=/tmp/wasmstream-apicurio-start.log
    bash tests/schemareg/apicurio.sh start >"$apicurio_env" 2>"$apicurio_log" &
    apicurio_start=$!
    at_exit 'bash tests/schemareg/apicurio.sh stop'
    # A second one as a production registry is reached, for the
    # registry-authentication test (tests/integration/schema_auth_test.go):
    # https only, a certificate of a private CA made at its start, basic
    # auth of one user (APICURIO_SECURE=1; Apicurio's basic auth covers a
    # whole instance, so it cannot be the plain one). Started beside the
    # first (about 6 s of JVM start, overlapping the steps below).
    secure_apicurio() {
        APICURIO_SECURE=1 APICURIO_PORT=23483 APICURIO_MANAGEMENT_PORT=23484 \
            APICURIO_DATA_DIR=/tmp/wasmstream-apicurio-secure bash tests/schemareg/apicurio.sh "$@"
    }
    secure_apicurio_env=/tmp/wasmstream-apicurio-secure.env secure_apicurio_log=/tmp/wasmstream-apicurio-secure-start.log
    secure_apicurio start >"$secure_apicurio_env" 2>"$secure_apicurio_log" &
    secure_apicurio_start=$!
    at_exit 'secure_apicurio stop'
    step "starting a real Jaeger (waits for its build; built from source the first time)"
    wait "$jaeger_build" || { tail -n 50 /tmp/wasmstream-jaeger-build/build.log >&2; echo "tests/run.sh: the Jaeger build failed (log above)" >&2; exit 1; }
    eval "$(bash tests/jaeger/jaeger.sh start)"
    export JAEGER_QUERY JAEGER_OTLP_HTTP JAEGER_OTLP_GRPC
    at_exit 'bash tests/jaeger/jaeger.sh stop'
    say "Jaeger query API at $JAEGER_QUERY, OTLP/HTTP at $JAEGER_OTLP_HTTP"
    # Scheduling under oversubscription is only faithful without the race
    # detector's instrumentation, nor a build beside it: run that test plainly
    # too, once Jaeger's build is done.
    step "oversubscribed instances meet their deadlines (no race detector)"
    go test -count=1 -run TestOversubscribedInstancesMeetDeadlines ./host/
    step "starting a 3-node Kafka cluster behind a fault proxy (the fault tests)"
    cluster_env="$(bash tests/kafka/kafka.sh cluster 3)" || { echo "tests/run.sh: the 3-node cluster did not start" >&2; exit 1; }
    eval "$cluster_env"
    export KAFKA_CLUSTER_BROKERS KAFKA_CLUSTER_PROXIED KAFKA_CLUSTER_PROXY KAFKA_CLUSTER_DIR
    at_exit 'bash tests/kafka/kafka.sh stop-cluster'
    step "waiting for the schema registry"
    wait "$apicurio_start" || { cat "$apicurio_log" >&2; echo "tests/run.sh: the schema registry did not start (log above)" >&2; exit 1; }
    eval "$(cat "$apicurio_env")"
    export SCHEMA_REGISTRY_URL
    say "schema registry at $SCHEMA_REGISTRY_URL"
    wait "$secure_apicurio_start" || { cat "$secure_apicurio_log" >&2; echo "tests/run.sh: the schema registry with TLS and basic auth did not start (log above)" >&2; exit 1; }
    eval "$(cat "$secure_apicurio_env")"
    export SCHEMA_REGISTRY_SECURE_URL SCHEMA_REGISTRY_SECURE_CA_FILE SCHEMA_REGISTRY_SECURE_USER SCHEMA_REGISTRY_SECURE_PASSWORD_FILE
    say "schema registry with TLS and basic auth at $SCHEMA_REGISTRY_SECURE_URL, CA $SCHEMA_REGISTRY_SECURE_CA_FILE"
    step "go test -race, the unit packages (on the in-process broker; the benchmark smoke run, fuzz targets, cargo test and the second lane of unit packages beside them)"
    # The tests on brokers of their own — the 3-node cluster's fault tests,
    # the secured broker's — run in a second go test beside this one: they
    # mostly wait on brokers (a node's restart takes 20-50 s), share nothing
    # with the single broker's tests, and assert no latency. Its output is
    # printed when it ends; either run failing fails the test command.
    own='^(TestCluster|TestSecure|TestLeastPrivilege|TestStopWhileBrokersDown)'
    own_log=/tmp/wasmstream-tests-own-brokers.log
    side_log=/tmp/wasmstream-tests-side.log
    main_log=/tmp/wasmstream-tests-main.log
    rm -f "$own_log" "$side_log" "$main_log"
    test_logs=("$main_log" "$own_log" "$side_log")
    go test "${race[@]}" -count=1 -timeout 45m -tags integration -run "$own" ./tests/integration/ >"$own_log" 2>&1 &
    own_pid=$!
    at_exit 'kill $own_pid 2>/dev/null'
    # Beside the unit packages (one at a time, they keep about one core
    # busy): the benchmark smoke run, the fuzz targets (one fuzzing worker
    # each) and the Rust SDK's cargo tests, then the second lane of unit
    # packages (unit_pkgs). Their output is printed when they end; they
    # must end before the integration tests start, which measure latency
    # and RSS and so have the cores to themselves (but for the tests on
    # brokers of their own, which mostly wait).
    lane2_pkgs="$(unit_pkgs 2)" lane1_pkgs="$(unit_pkgs 1)"
    (
        set -e
        say "benchmark smoke run (checks the harness, not speed)"
        BENCH_RECORDS=5000 go test -count=1 -run '^$' -bench . -benchtime 1x -timeout 15m -tags integration ./tests/bench/
        go test -count=1 -run "^$" -bench . -benchtime 1x -tags integration ./host/
        say "fuzz targets, briefly (FUZZTIME=10m bash tests/fuzz.sh for a long run)"
        FUZZTIME="${FUZZTIME:-5s}" FUZZPARALLEL="${FUZZPARALLEL:-1}" bash tests/fuzz.sh
        say "cargo test: the Rust SDK and the Rust examples, on the host"
        make -s rust-test
        say "go test -race, the unit packages' second lane"
        go test "${race[@]}" -count=1 -p 1 -timeout 60m -tags integration -skip "$own" $lane2_pkgs
    ) >"$side_log" 2>&1 &
    side_pid=$!
    at_exit 'kill $side_pid 2>/dev/null'
    main_rc=0
    go test "${race[@]}" -count=1 -p 1 -timeout 60m -tags integration -skip "$own" $lane1_pkgs 2>&1 | tee -a "$main_log" || main_rc=$?
    step "waiting for the benchmark smoke run, the fuzz targets, cargo test and the unit packages' second lane (started beside the first)"
    side_rc=0
    wait "$side_pid" || side_rc=$?
    say "the benchmark smoke run, fuzz targets, cargo test and the unit packages' second lane:"
    cat "$side_log" >&2
    ((side_rc == 0)) || { echo "tests/run.sh: the benchmark smoke run, a fuzz target, cargo test or a unit package of the second lane failed (above)" >&2; main_rc=1; }
    step "go test -race ./tests/integration/ (the integration tests on the real broker)"
    go test "${race[@]}" -count=1 -timeout 40m -tags integration -skip "$own" ./tests/integration/ 2>&1 | tee -a "$main_log" || main_rc=$?
    step "waiting for the tests on brokers of their own (started beside the race run)"
    own_rc=0
    wait "$own_pid" || own_rc=$?
    say "the tests on brokers of their own ($own):"
    cat "$own_log" >&2
    ((main_rc == 0 && own_rc == 0)) || exit 1
    ;;
bench)
    step "benchmarks on the real broker"
    out=tests/bench/results
    mkdir -p "$out"
    go test -run '^$' -bench . -benchtime 1x -count 1 -timeout 90m -tags integration ./tests/bench/ | tee "$out/latest.txt"
    go test -run '^$' -bench . -count 1 -tags integration ./host/ | tee -a "$out/latest.txt"
    header="# Benchmark suite results

$(date -u +%Y-%m-%d) on $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr); broker: Apache Kafka 4.4.0 on 127.0.0.1.
Command: \`make bench\` (tests/run.sh bench). Raw output: latest.txt. Chart: latest.png.
"
    go run ./tests/bench/report -in "$out/latest.txt" -md "$out/latest.md" -png "$out/latest.png" -header "$header"
    say "results in $out/latest.md and $out/latest.png"
    ;;
*)
    echo "usage: tests/run.sh [test|bench]" >&2
    exit 2
    ;;
esac
