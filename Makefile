# wasmstream — the two commands a newcomer needs:
#   make demo   run the demo on an embedded broker (no Kafka installed)
#   make test   run every test, against a real Kafka broker it starts itself
GO ?= go
PLUGINS := uppercase filter enrich hash lookup
WASM := $(foreach p,$(PLUGINS),plugins/examples/$(p)/$(p).wasm)

.PHONY: demo test build plugins c-plugins bench clean

demo: build plugins
	./bin/wasmstream demo --config config.yaml $(DEMO_FLAGS)

build:
	$(GO) build -o bin/wasmstream ./cmd/wasmstream

plugins: $(WASM)

# Each example is a Go guest built with the standard toolchain.
plugins/examples/%.wasm: FORCE
	cd $(dir $@) && GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o $(notdir $@) .

# The C example, written from abi/ABI.md alone (needs clang, lld, wasi-libc,
# libclang-rt-14-dev-wasm32; the test command installs them).
c-plugins: plugins/examples/c-uppercase/uppercase.wasm

plugins/examples/c-uppercase/uppercase.wasm: plugins/examples/c-uppercase/uppercase.c
	clang --target=wasm32-wasi -O2 -mexec-model=reactor -o $@ $<

test:
	bash tests/run.sh

bench:
	bash tests/run.sh bench

clean:
	rm -rf bin $(WASM) plugins/examples/c-uppercase/uppercase.wasm

FORCE:
