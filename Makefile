# Weft. `make run` starts the host; `make test` runs every test.
GO      ?= go
BIN     := bin
WASM    := GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared

# Every directory under examples/plugins is a plugin: Go (main.go), C (*.c)
# or Rust (Cargo.toml).
GO_PLUGINS   := $(patsubst examples/plugins/%/main.go,%,$(wildcard examples/plugins/*/main.go))
C_PLUGINS    := $(sort $(patsubst examples/plugins/%/,%,$(dir $(wildcard examples/plugins/*/*.c))))
RUST_PLUGINS := $(patsubst examples/plugins/%/Cargo.toml,%,$(wildcard examples/plugins/*/Cargo.toml))
PLUGINS      := $(GO_PLUGINS:%=$(BIN)/plugins/%.wasm) $(C_PLUGINS:%=$(BIN)/plugins/%.wasm) $(RUST_PLUGINS:%=$(BIN)/plugins/%.wasm)
# Rust builds with Debian's toolchain, whatever rustup puts first on PATH,
# offline from the crates Debian packages (scripts/deps.sh installs both);
# cargo's output goes to bin/cargo, not into the source tree.
RUST_CARGO   ?= /usr/bin/cargo
RUST_RUSTC   ?= /usr/bin/rustc
RUST_RUSTDOC ?= /usr/bin/rustdoc
RUST_ENV     := RUSTC=$(RUST_RUSTC) RUSTDOC=$(RUST_RUSTDOC) CARGO_TARGET_DIR=$(CURDIR)/$(BIN)/cargo
RUST_SDK_SRC := $(wildcard sdk/rust/src/*.rs sdk/rust/src/*/*.rs) sdk/rust/Cargo.toml
SDK_SRC    := $(wildcard sdk/*.go abi/*.go) abi/go.mod sdk/go.mod go.mod go.sum examples/go.mod examples/go.sum
# abi/ is a module of its own (github.com/weftworks/weft/abi, no
# dependencies), as are sdk/ (github.com/weftworks/weft/sdk, which requires
# abi only), bench/ and examples/ (the example plugins and their own
# dependencies, such as golang.org/x/image): `go test ./...` and
# `go vet ./...` at the root do not reach them, so test, fuzz and lint run
# them in their directories.
# The SDK's code for wasm (host_wasm.go) is vetted for wasip1 too.
SDK_VET    := cd sdk && $(GO) vet ./... && GOOS=wasip1 GOARCH=wasm $(GO) vet ./...
# Each module's go.mod and go.sum are what go mod tidy makes them: test (and
# so CI) and lint fail otherwise.
TIDY_CHECK := @for m in . abi bench sdk examples plugins/testdata; do (cd $$m && $(GO) mod tidy -diff) || { echo "go mod tidy: $$m/go.mod is not tidy (run go mod tidy there)"; exit 1; }; done

.PHONY: all build plugins test deps bench bench-http fuzz run fmt lint clean chaos chaos-cluster chaos-partitions chaos-batch soak
all: build plugins

build:
	$(GO) build -o $(BIN)/weft ./cmd/host

plugins: $(PLUGINS)

.SECONDEXPANSION:
$(GO_PLUGINS:%=$(BIN)/plugins/%.wasm): $(BIN)/plugins/%.wasm: $$(wildcard examples/plugins/$$*/*.go) $(SDK_SRC)
	@mkdir -p $(@D)
	cd examples/plugins/$* && $(WASM) -o $(CURDIR)/$@.tmp . && mv $(CURDIR)/$@.tmp $(CURDIR)/$@

$(C_PLUGINS:%=$(BIN)/plugins/%.wasm): $(BIN)/plugins/%.wasm: $$(wildcard examples/plugins/$$*/*.c examples/plugins/$$*/*.h) | deps
	@mkdir -p $(@D)
	clang --target=wasm32-wasi -mexec-model=reactor -O2 -Wall -o $@.tmp $(filter %.c,$^) && mv $@.tmp $@

# The crate is named as its directory; cargo writes the library of a crate
# a-b as a_b.wasm.
$(RUST_PLUGINS:%=$(BIN)/plugins/%.wasm): $(BIN)/plugins/%.wasm: $$(wildcard examples/plugins/$$*/src/*.rs examples/plugins/$$*/src/*/*.rs examples/plugins/$$*/Cargo.* examples/plugins/$$*/.cargo/config.toml) $(RUST_SDK_SRC) | deps
	@mkdir -p $(@D)
	cd examples/plugins/$* && $(RUST_ENV) $(RUST_CARGO) build --release --offline --locked --target wasm32-wasi --quiet
	cp $(BIN)/cargo/wasm32-wasi/release/$(subst -,_,$*).wasm $@.tmp && mv $@.tmp $@

deps:
	@./scripts/deps.sh

test: deps plugins
	$(TIDY_CHECK)
	$(GO) vet ./...
	cd abi && $(GO) vet ./...
	cd bench && $(GO) vet ./...
	cd examples && $(GO) vet ./...
	$(SDK_VET)
	$(GO) test -race -timeout 60m ./...
	cd abi && $(GO) test -race ./...
	cd examples && $(GO) test -race -timeout 20m ./...
	cd sdk && $(GO) test -race -timeout 30m ./...
	cd sdk/rust && $(RUST_ENV) $(RUST_CARGO) test --offline --locked --quiet

bench: plugins
	./bench/run.sh

# Throughput and latency over HTTP, from a separate load process, against
# weft serve on the embedded store and on Redis (bench/http.sh).
bench-http: deps build plugins
	./bench/http.sh

# The chaos harness at full scale (docs/reliability.md): three nodes on one
# Redis, CHAOS_INSTANCES instances while nodes are killed, paused and
# Redis is killed once. `make test` runs a short variant of the same test.
# Prints the run's summary line; the report and the node logs are in the
# directory it names, the whole test output in bin/chaos/chaos.log.
CHAOS_INSTANCES ?= 10000
CHAOS_RATE      ?= 0
CHAOS_SEED      ?= 0
chaos: plugins
	@mkdir -p $(BIN)/chaos
	@$(GO) test -run '^TestChaos$$' -count=1 -v -timeout 60m ./cmd/host \
		-args -chaos.instances=$(CHAOS_INSTANCES) -chaos.rate=$(CHAOS_RATE) -chaos.seed=$(CHAOS_SEED) \
		> $(BIN)/chaos/chaos.log 2>&1; status=$$?; \
		grep -h '^chaos \(PASS\|FAIL\)' $(BIN)/chaos/chaos.log || tail -30 $(BIN)/chaos/chaos.log; exit $$status

# The same chaos run on a Redis Cluster (docs/reliability.md): three masters
# with a replica each, the nodes waiting for a replica to have each write
# (redis.wait_replicas 1); instead of the Redis kill, the master of the
# store's slot and later the queue's master are SIGKILLed, their replicas
# promoted, and they rejoin as replicas. Takes CHAOS_INSTANCES, CHAOS_RATE
# and CHAOS_SEED as `make chaos` does; not part of `make test`. Prints the
# summary line; the report, the node logs and (after a failure) every Redis
# node's directory are in the directory it names, the whole test output in
# bin/chaos/chaos-cluster.log.
chaos-cluster: plugins
	@mkdir -p $(BIN)/chaos
	@$(GO) test -run '^TestChaos$$' -count=1 -v -timeout 60m ./cmd/host \
		-args -chaos.redis=cluster -chaos.instances=$(CHAOS_INSTANCES) -chaos.rate=$(CHAOS_RATE) -chaos.seed=$(CHAOS_SEED) \
		> $(BIN)/chaos/chaos-cluster.log 2>&1; status=$$?; \
		grep -h '^chaos-cluster \(PASS\|FAIL\)' $(BIN)/chaos/chaos-cluster.log || tail -30 $(BIN)/chaos/chaos-cluster.log; exit $$status

# The cluster chaos run with the store divided into CHAOS_PARTITIONS
# partitions (redis.partitions, docs/cluster.md "Partitions"): the first
# master killed is the catalog's, the second another master that holds
# partitions; the checks read through the partitioned store. Takes the
# chaos-cluster variables too. Prints the summary line; the whole test
# output is in bin/chaos/chaos-partitions.log.
CHAOS_PARTITIONS ?= 16
chaos-partitions: plugins
	@mkdir -p $(BIN)/chaos
	@$(GO) test -run '^TestChaos$$' -count=1 -v -timeout 60m ./cmd/host \
		-args -chaos.redis=cluster -chaos.partitions=$(CHAOS_PARTITIONS) -chaos.instances=$(CHAOS_INSTANCES) -chaos.rate=$(CHAOS_RATE) -chaos.seed=$(CHAOS_SEED) \
		> $(BIN)/chaos/chaos-partitions.log 2>&1; status=$$?; \
		grep -h '^chaos-cluster-partitions \(PASS\|FAIL\)' $(BIN)/chaos/chaos-partitions.log || tail -30 $(BIN)/chaos/chaos-partitions.log; exit $$status

# The batch jobs' chaos test at full scale (docs/reliability.md): a batch
# signals CHAOS_BATCH_INSTANCES waiting instances, then two more pause and
# resume as many, while the node stepping the batch and another are
# SIGKILLed; checks that each instance was operated on exactly once.
# `make test` runs a short variant (600). Prints the summary line; the
# report and the node logs are in the directory it names, the whole test
# output in bin/chaos/chaos-batch.log.
CHAOS_BATCH_INSTANCES ?= 10000
CHAOS_BATCH_RATE      ?= 0
CHAOS_BATCH_SEED      ?= 0
chaos-batch:
	@mkdir -p $(BIN)/chaos
	@$(GO) test -run '^TestChaosBatch$$' -count=1 -v -timeout 60m ./cmd/host \
		-args -chaosbatch.instances=$(CHAOS_BATCH_INSTANCES) -chaosbatch.rate=$(CHAOS_BATCH_RATE) -chaosbatch.seed=$(CHAOS_BATCH_SEED) \
		> $(BIN)/chaos/chaos-batch.log 2>&1; status=$$?; \
		grep -h '^chaos-batch \(PASS\|FAIL\)' $(BIN)/chaos/chaos-batch.log || tail -30 $(BIN)/chaos/chaos-batch.log; exit $$status

# The soak (docs/reliability.md): a steady SOAK_RATE starts per second for
# SOAK, sampling every node's memory, goroutines and open files and the
# store's size; fails when one still grows at the end. Not part of `make
# test`. Needs engine.retention (SOAK_RETENTION) in the build.
SOAK           ?= 30m
SOAK_RATE      ?= 5
SOAK_RETENTION ?= 1m
soak: plugins
	@mkdir -p $(BIN)/chaos
	@$(GO) test -run '^TestSoak$$' -count=1 -v -timeout 24h ./cmd/host \
		-args -soak.duration=$(SOAK) -soak.rate=$(SOAK_RATE) -soak.retention=$(SOAK_RETENTION) \
		> $(BIN)/chaos/soak.log 2>&1; status=$$?; \
		grep -h '^soak \(PASS\|FAIL\)' $(BIN)/chaos/soak.log || tail -30 $(BIN)/chaos/soak.log; exit $$status

# Runs every fuzz target for FUZZTIME each (go test -fuzz takes one target
# at a time), or for the time a target names after a second colon: the
# HTTP API's end-to-end target (a real node on loopback, requests built
# from the OpenAPI document) runs for FUZZ_API_TIME. New failing inputs
# land in the package's testdata/fuzz. A package in a module of its own
# (./sdk, ./examples/...) is fuzzed from that module's directory.
FUZZTIME ?= 30s
FUZZ_API_TIME ?= 3m
FUZZ_TARGETS := \
	./internal/definition:FuzzParse \
	./internal/batch:FuzzParseDocument \
	./internal/query:FuzzParse \
	./internal/query:FuzzCheckEval \
	./internal/queue/fair:FuzzOrder \
	./internal/ratelimit:FuzzReserve \
	./internal/ratelimit:FuzzSequence \
	./internal/ratelimit:FuzzBacklog \
	./internal/slots:FuzzSlots \
	./internal/schedule:FuzzCompile \
	./internal/schedule:FuzzParseDocument \
	./internal/jsonv:FuzzNew \
	./internal/store:FuzzValidateJSON \
	./internal/store:FuzzEncodeHistory \
	./internal/store/embedded:FuzzSplitInst \
	./internal/store/embedded:FuzzHistEntries \
	./internal/store/embedded:FuzzDecodeMeta \
	./internal/store/embedded:FuzzEncodeMeta \
	./internal/store/tuple:FuzzTuple \
	./internal/store/redisstore:FuzzParseLease \
	./internal/redistest:FuzzParseClusterNodes \
	./internal/tracing:FuzzTraceparent \
	./host/api:FuzzAPI:$(FUZZ_API_TIME) \
	./sdk:FuzzAppendJSONString \
	./sdk:FuzzHeaderRoundTrip \
	./plugins:FuzzLoad \
	./plugins:FuzzHostileGuest \
	./plugins:FuzzUploadGenerated \
	./plugins:FuzzHTTPRequest \
	./plugins/grant:FuzzParse \
	./plugins/tape:FuzzUnmarshal \
	./plugins/tape:FuzzUnmarshalAttempt \
	./plugins/tape:FuzzUnmarshalBundle \
	./internal/wasmbin:FuzzReader \
	./internal/instrument:FuzzRewrite \
	./internal/instrument:FuzzGenerated \
	./examples/plugins/ckit/test:FuzzSameAsKit
fuzz: deps plugins
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t#*:}; time=$(FUZZTIME); \
		case $$name in *:*) time=$${name#*:}; name=$${name%%:*};; esac; \
		echo "fuzz $$name in $$pkg for $$time"; dir=$$pkg; \
		while [ ! -f "$$dir/go.mod" ]; do dir=$$(dirname "$$dir"); done; \
		rel=$${pkg#$$dir}; rel=$${rel#/}; \
		(cd "$$dir" && $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $$time "./$$rel"); \
	done

# On a first start (empty ./data) the host loads the example plugins and
# workflows; admin refresh reloads the workflows from examples/workflows.
run: build plugins
	$(BIN)/weft serve --listen 127.0.0.1:8080 --data-dir ./data --workflows-dir examples/workflows \
		--seed $(BIN)/plugins --seed examples/workflows

fmt:
	gofmt -w $$(git ls-files '*.go')

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: the files above need formatting (make fmt)"; exit 1; }
	$(GO) vet ./...
	cd abi && $(GO) vet ./...
	cd bench && $(GO) vet ./...
	cd examples && $(GO) vet ./...
	$(SDK_VET)
	$(TIDY_CHECK)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd abi && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd bench && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd examples && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd sdk && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

clean:
	rm -rf $(BIN)
