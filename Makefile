# wasmstream — the two commands a newcomer needs:
#   make demo   run the demo on an embedded broker (no Kafka installed)
#   make test   run every test, against a real Kafka broker it starts itself
# and the loop to run while working:
#   make check  gofmt, vet and every Go unit test that needs no JVM (minutes)
GO ?= go
PLUGINS := uppercase filter enrich hash lookup count count-async dedup avro-serde window-count
WASM := $(foreach p,$(PLUGINS),plugins/examples/$(p)/$(p).wasm)

RUST_EXAMPLES := rust-uppercase rust-filter rust-lookup rust-count rust-dedup rust-avro-serde
RUST_CRATES := abi/sdk/rust/wasmstream $(addprefix plugins/examples/,$(RUST_EXAMPLES))
# The Rust toolchain and WASI target, as abi/sdk/rust/wasm-target.sh finds
# them: rustup's with wasm32-wasip1 (rustup target add wasm32-wasip1), else
# Debian's rustc 1.63 with wasm32-wasi (rustc, cargo, libstd-rust-dev-wasm32;
# the test command installs them), the offline fallback for crate-free code.
RUST_WASM = $(eval RUST_WASM := $$(shell sh abi/sdk/rust/wasm-target.sh))$(RUST_WASM)
RUST_TARGET = $(word 2,$(RUST_WASM))
CARGO ?= env PATH=$(word 1,$(RUST_WASM)):$(PATH) cargo

.PHONY: demo test check build build-perfmap plugins c-plugins as-plugins as-sdk-test rust-plugins rust-test redpanda-plugins conformance bench clean

demo: build plugins
	./bin/wasmstream demo --config config.yaml $(DEMO_FLAGS)

build:
	$(GO) build -o bin/wasmstream ./cmd/wasmstream

# The host built to name each module's compiled functions for Linux perf
# (README.md, "Where a processor spends its time").
build-perfmap:
	$(GO) build -tags perfmap -o bin/wasmstream-perfmap ./cmd/wasmstream

plugins: $(WASM)

# Each example is a Go guest built with the standard toolchain.
plugins/examples/%.wasm: FORCE
	cd $(dir $@) && GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o $(notdir $@) .

# The C examples: uppercase written from abi/ABI.md alone, enrich on the C
# SDK (abi/sdk/c/wasmstream.h). They need clang, lld, wasi-libc,
# libclang-rt-14-dev-wasm32; the test command installs them.
c-plugins: plugins/examples/c-uppercase/uppercase.wasm plugins/examples/c-enrich/enrich.wasm

plugins/examples/c-uppercase/uppercase.wasm: plugins/examples/c-uppercase/uppercase.c plugins/examples/c-uppercase/case_ranges.h
	clang --target=wasm32-wasi -O2 -mexec-model=reactor -o $@ $<

plugins/examples/c-enrich/enrich.wasm: plugins/examples/c-enrich/enrich.c abi/sdk/c/wasmstream.h
	clang --target=wasm32-wasi -O2 -mexec-model=reactor -o $@ $<

# The AssemblyScript SDK and examples (needs node and npm; the test command
# installs them). npm ci installs the compiler pinned in package-lock.json.
AS_SDK := abi/sdk/assemblyscript
AS_PLUGINS := uppercase filter lookup count dedup

$(AS_SDK)/node_modules/.package-lock.json: $(AS_SDK)/package-lock.json
	cd $(AS_SDK) && npm ci --no-audit --no-fund --prefer-offline

as-sdk-test: $(AS_SDK)/node_modules/.package-lock.json
	cd $(AS_SDK) && npm test

as-plugins: $(AS_SDK)/node_modules/.package-lock.json
	$(foreach p,$(AS_PLUGINS),node $(AS_SDK)/build.mjs plugins/examples/as-$(p)/assembly/index.ts plugins/examples/as-$(p)/$(p).wasm &&) true

# The Rust examples, built with the Rust SDK (abi/sdk/rust/wasmstream); each
# module is plugins/examples/rust-<name>/target/$(RUST_TARGET)/release/rust_<name>.wasm.
rust-plugins:
	@test -n "$(RUST_TARGET)" || exit 1
	for c in $(RUST_EXAMPLES); do (cd plugins/examples/$$c && $(CARGO) build --quiet --release --target $(RUST_TARGET)) || exit 1; done

# cargo test of the Rust SDK and examples, on the host (no WebAssembly
# runtime); host/rustguest_test.go runs the examples inside the host. One
# target directory for all of them: the SDK is compiled once, not per crate.
rust-test:
	for c in $(RUST_CRATES); do (cd $$c && CARGO_TARGET_DIR=$(CURDIR)/.cache/rust-test $(CARGO) test --quiet) || exit 1; done
	cd abi/sdk/rust/wasmstream && CARGO_TARGET_DIR=$(CURDIR)/.cache/rust-test $(CARGO) test --quiet --features avro

# Redpanda Data Transforms built from Redpanda's published SDKs, unmodified
# (tests/redpanda; docs/REDPANDA-TRANSFORMS.md): the Go SDK v1.1.0 with the
# standard toolchain (a command, not c-shared), the Rust SDK 1.1.0. The
# tests that run them build them the same way.
redpanda-plugins:
	@test -n "$(RUST_TARGET)" || exit 1
	cd tests/redpanda/redpanda-go && GOOS=wasip1 GOARCH=wasm $(GO) build -o redpanda_go.wasm .
	cd tests/redpanda/redpanda-go-identity && GOOS=wasip1 GOARCH=wasm $(GO) build -o redpanda_go_identity.wasm .
	cd tests/redpanda/redpanda-rust && $(CARGO) build --quiet --release --target $(RUST_TARGET)

# The conformance kit (internal/conformance) over every language's
# examples, from the built modules; TestExamplesConform runs the same in the
# test command and also requires identical outputs across languages.
conformance: build plugins c-plugins as-plugins rust-plugins
	./bin/wasmstream conformance --quiet --example uppercase plugins/examples/uppercase/uppercase.wasm plugins/examples/c-uppercase/uppercase.wasm plugins/examples/as-uppercase/uppercase.wasm plugins/examples/rust-uppercase/target/$(RUST_TARGET)/release/rust_uppercase.wasm
	./bin/wasmstream conformance --quiet --example filter plugins/examples/filter/filter.wasm plugins/examples/as-filter/filter.wasm plugins/examples/rust-filter/target/$(RUST_TARGET)/release/rust_filter.wasm
	./bin/wasmstream conformance --quiet --example lookup plugins/examples/lookup/lookup.wasm plugins/examples/as-lookup/lookup.wasm plugins/examples/rust-lookup/target/$(RUST_TARGET)/release/rust_lookup.wasm

test:
	bash tests/run.sh

# The fast loop (README, "Tests and benchmarks"): gofmt, go vet (the host,
# the integration tests, the SDK and examples as guests), every Go unit
# test — on franz-go's in-process broker, none needs a JVM, a real broker
# or Jaeger — and the deployment recipes' checks. Without the race
# detector, which make test runs everything under: CHECK_FLAGS=-race adds
# it here (and takes longer).
CHECK_FLAGS ?=
check: build plugins
	@f="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$f" ]; then echo "not gofmt-formatted:"; echo "$$f"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags integration ./tests/...
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./abi/... ./plugins/examples/...
	$(GO) test $(CHECK_FLAGS) -count=1 -parallel 6 ./...
	cd deploy/check && $(GO) test -count=1 ./...

bench:
	bash tests/run.sh bench

clean:
	rm -rf bin $(WASM) plugins/examples/c-uppercase/uppercase.wasm plugins/examples/c-enrich/enrich.wasm $(foreach p,$(AS_PLUGINS),plugins/examples/as-$(p)/$(p).wasm) $(addsuffix /target,$(RUST_CRATES)) tests/redpanda/redpanda-go/redpanda_go.wasm tests/redpanda/redpanda-go-identity/redpanda_go_identity.wasm tests/redpanda/redpanda-rust/target

FORCE:
