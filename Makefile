# hivedr — see README.md. `make test` and `make demo` are the two commands a
# new machine needs; everything they use is installed by the scripts.

SHELL   := /bin/bash
GO      ?= go
STACK   := bash e2e/stack/stack.sh
PKGS     = $(shell $(GO) list ./... | grep -v '/e2e$$')

# Build stamp: `hivedr version`, hivedr_build_info and the image's labels.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DATE    ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
BI      := github.com/hivedr/hivedr/internal/buildinfo
LDFLAGS := -s -w -X $(BI).version=$(VERSION) -X $(BI).commit=$(COMMIT) -X $(BI).date=$(DATE)

.PHONY: all build image tools test unit e2e fuzz vet fmt-check demo bench-tail bench-lag bench-copy bench-bootstrap bench-apply bench-memory bench-idle bench-scale bench-newdb bench-iceberg stack-up stack-down stack-status stack-clean \
	stack-secure-up stack-secure-down stack-secure-status stack-secure-clean \
	stack-privacy-up stack-privacy-down stack-privacy-status stack-privacy-clean soak soak-down

all: build

## build: the hivedr binary in bin/
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/hivedr ./cmd/hivedr

## test: vet, the tools, unit tests, then the local stacks up (the plain one, the secured one and its
## privacy variant), then the e2e tests on them (TestSecure* on the secured stack, TestPrivacy* on
## the privacy one; they fail if it is not up), through
## e2e/stack/phases.sh: it stops at the first phase that fails and ends with one line per phase (wall
## time; tests run, passed, failed) and the totals, `N passed, N failed`, alone on the last line
test:
	@bash e2e/stack/phases.sh "$(MAKE)"

## tools: helm, promtool and prometheus for the deployment checks, and the Python consumer of
## TestConsumer* (deploy/tools.sh, deploy/pyconsumer.sh)
tools:
	bash deploy/tools.sh

## image: the OCI image of hivedr, IMAGE_OUT (default bin/hivedr-image.tar; an OCI image layout; no
## Docker engine needed): a static binary (built to IMAGE_BIN) on an empty base, non-root, CA
## certificates; `docker load -i` reads it. TestImageBuildsAndRuns runs this recipe.
GOARCH_IMAGE ?= $(shell $(GO) env GOARCH)
IMAGE_BIN    ?= bin/linux-$(GOARCH_IMAGE)/hivedr
IMAGE_OUT    ?= bin/hivedr-image.tar
image:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH_IMAGE) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(IMAGE_BIN) ./cmd/hivedr
	$(GO) run ./deploy/image -binary $(IMAGE_BIN) -arch $(GOARCH_IMAGE) -out $(IMAGE_OUT) \
		-version $(VERSION) -commit $(COMMIT) -date $(DATE)

## unit: tests that need no stack (kfake and pure code only): go test -race -shuffle=on. The race detector needs cgo:
## a C compiler, which `make tools` installs. UNITFLAGS adds go test flags
## (`make test` adds -v, to count the tests); the soak checker's own tests (soak tag, no stack) run here too
## SHUFFLE: the test order of unit and e2e, `on` (a new seed each run; go test prints it as
## "-test.shuffle N") or a seed to replay, e.g. `make e2e SHUFFLE=1796512861335799451`
SHUFFLE   ?= on
UNITFLAGS ?=
unit:
	CGO_ENABLED=1 $(GO) test -race -shuffle=$(SHUFFLE) -count=1 -timeout 30m $(UNITFLAGS) $(PKGS)
	CGO_ENABLED=1 $(GO) test -tags soak -race -count=1 $(UNITFLAGS) -run '^TestSoak(Diff|Model)' ./e2e/
	cd third_party/colinmarc-hdfs && CGO_ENABLED=1 $(GO) test -race -shuffle=$(SHUFFLE) -count=1 $(UNITFLAGS) ./internal/rpc/ ./internal/transfer/

## e2e: tests on the real local stacks (fails if one is not up), in a random order (SHUFFLE), through
## e2e/stack/e2e.sh: the secured stacks' tests in a second go test process beside the others
## (E2E_SPLIT=0: one process); the build first fills the build cache, so whichever test runs the
## hivedr binary first only links it within its deadline
e2e:
	$(GO) build -o /dev/null ./cmd/hivedr
	GO=$(GO) SHUFFLE=$(SHUFFLE) bash e2e/stack/e2e.sh

## fuzz: each fuzz target of a decoder of untrusted input (notifications, Thrift JSON, Avro, config,
## locations, and the DataNode and NameNode bytes internal/hdfscrc reads) for FUZZTIME (default 30s); crashers land
## in the package's testdata/fuzz and run in every `make unit` from then on
FUZZTIME ?= 30s
FUZZ_TARGETS = ./producer:FuzzDecode ./producer:FuzzThriftJSON ./schemas:FuzzDecode \
	./internal/config:FuzzParse ./internal/location:FuzzParse \
	./internal/hdfscrc:FuzzBlockOpResponse ./internal/hdfscrc:FuzzReadDelimited ./internal/hdfscrc:FuzzDecodeBlockToken \
	./internal/hdfscrc:FuzzDigestChallenge ./internal/hdfscrc:FuzzSASLHandshake ./internal/hdfscrc:FuzzUnwrap
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t%%:*} $${t##*:} for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t##*:}$$" -fuzztime $(FUZZTIME) "$${t%%:*}"; \
	done

vet: fmt-check
	$(GO) vet ./...
	$(GO) vet -tags benchlag ./e2e/
	$(GO) vet -tags benchbootstrap ./e2e/
	$(GO) vet -tags benchapply ./e2e/
	$(GO) vet -tags benchmem ./e2e/
	$(GO) vet -tags benchscale ./e2e/
	$(GO) vet -tags benchiceberg ./e2e/
	$(GO) vet -tags soak ./e2e/

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); \
	if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi

## bench-tail: tailer throughput from a 200,000-event Postgres log into Kafka, alone and with the
## change view (tailer.cdc): the view's cost to it, MET or MISSED (at most 30%)
bench-tail: stack-up
	$(GO) test -count=1 -run '^$$' -bench BenchmarkTailerPostgres -benchtime 1x -timeout 30m ./e2e/

## bench-lag: end-to-end lag (source event -> applied on DR) of the three daemons under a steady
## synthetic workload with files written straight into a notification log (workload.Synth):
## BENCH_LAG_RATE events/s (default 100) for BENCH_LAG_SECONDS (default 60) over BENCH_LAG_DBS
## databases (default 10) of BENCH_LAG_TABLES_PER_DB tables (default 4); BENCH_LAG_FILE_SHARE of the
## steps bring a file (default 1); BENCH_LAG_COPY_WORKERS copyd's workers (default 8);
## BENCH_LAG_DRAIN_SECONDS (default 120) bounds the wait after it; BENCH_LAG_AT_COPY_RATE (e.g. 0.8) first
## measures `hivedr copy` on BENCH_LAG_CALIBRATE_FILES files of 4 KiB (default 1000) and sets the rate so the
## workload offers files at that share of it (target: p99 < 5 s and kept up)
.PHONY: bench-lag
bench-lag: stack-up
	$(GO) test -tags benchlag -count=1 -run '^TestPipelineLag$$' -v -timeout 120m ./e2e/

## bench-newdb: time from a new database's first event published to applied, over BENCH_NEWDB_COUNT new databases
## (default 30), a third created while the pipeline is quiet, the rest while BENCH_NEWDB_BUSY_DBS other databases
## (default 4) take BENCH_NEWDB_BUSY_RATE events/s (default 20)
bench-newdb: stack-up
	$(GO) test -tags benchlag -count=1 -run '^TestBenchNewDatabase$$' -v -timeout 60m ./e2e/

## bench-bootstrap: a bootstrap of BENCH_BOOTSTRAP_PARTITIONS partitions (default 100,000, tiny files,
## over BENCH_BOOTSTRAP_TABLES tables, default 20) through the three daemons, beside a raw Go client's
## batched add_partitions into the same DR metastore before and after it: wall time, partitions/s, peak
## RSS per process, the applier's DR calls; BENCH_BOOTSTRAP_FILES=0: partitions without files (metadata only)
bench-bootstrap: stack-up
	$(GO) test -tags benchbootstrap -count=1 -run '^TestBenchBootstrap$$' -v -timeout 100m ./e2e/

## bench-apply: the applier on a burst of ADD_PARTITION events of one table (BENCH_APPLY_PARTITIONS,
## default 20,000, one partition per event, no files) beside a raw Go client's batched add_partitions
## into the same DR metastore, and one plan per event (applier.batch_partitions 1) on
## BENCH_APPLY_UNBATCHED events (default 1000): partitions/s and the applier's peak RSS
bench-apply: stack-up
	$(GO) test -tags benchapply -count=1 -run '^TestBenchApply$$' -v -timeout 100m ./e2e/

## bench-memory: peak RSS of each daemon facing a backlog of BENCH_MEMORY_EVENTS events and as many copy
## tasks (default 1,000,000; copyd and the applier then run BENCH_MEMORY_SECONDS on it, default 180)
bench-memory: stack-up
	$(GO) test -tags benchmem -count=1 -run '^TestBenchMemory$$' -v -timeout 180m ./e2e/

## bench-idle: CPU of an idle pipeline over a quiet warehouse of BENCH_IDLE_TABLES tables (default 10,000) in
## BENCH_IDLE_DBS databases (default 20), heartbeats only, over BENCH_IDLE_SECONDS (default 60)
bench-idle: stack-up
	$(GO) test -tags benchmem -count=1 -run '^TestBenchIdle$$' -v -timeout 120m ./e2e/

## bench-scale: BENCH_SCALE_DBS databases (default 2,000, an event topic each) with BENCH_SCALE_TABLES tables
## (default 100,000) on a synthetic source, the three daemons over them: peak RSS and idle CPU
## (BENCH_SCALE_IDLE_SECONDS, default 60) per daemon, BENCH_SCALE_NEWDBS new databases' first event applied
## (default 20), an applier restart, `hivedr status` over all, `hivedr verify -db` of one with 1 and with all
bench-scale: stack-up
	$(GO) test -tags benchscale -count=1 -run '^TestBenchScale$$' -v -timeout 180m ./e2e/

## bench-iceberg: BENCH_ICEBERG_COMMITS Iceberg appends (default 40, of BENCH_ICEBERG_ROWS rows, default 300)
## by the reference implementation, replicated by the three daemons: commits/s replicated and the lag per
## commit, beside `hivedr copy` of the same table's files (the raw peer) in the same run
bench-iceberg: stack-up
	$(GO) test -tags benchiceberg -count=1 -run '^TestBenchIceberg$$' -v -timeout 60m ./e2e/

## bench-copy: hivedr's copy engine (`hivedr copy`) and copy daemon through Kafka (`hivedr copyd`: tasks
## in, completions out) against Hadoop DistCp, 1 GiB in 4 files and 10,000 files of 4 KiB
bench-copy: build stack-up
	HIVEDR_COPY_CMD="$(CURDIR)/bin/hivedr copy -log-level warn" HIVEDR_COPYD_CMD="$(CURDIR)/bin/hivedr copyd -log-level warn" \
		bash e2e/bench/bench-copy.sh

## soak: the chaos soak (docs/development.md "The soak") on a stack of its own in .stack-soak, every port
## +1000, so it can restart services beside the normal stack; HIVEDR_SOAK_DURATION (default 15m),
## HIVEDR_TEST_SEED replays its choices. soak-down stops that stack.
SOAK_STACK := HIVEDR_STACK_DIR=$(CURDIR)/.stack-soak HIVEDR_STACK_PORT_OFFSET=1000
soak:
	$(SOAK_STACK) $(STACK) up
	$(SOAK_STACK) $(GO) test -tags soak -count=1 -run '^TestSoak$$' -v -timeout 90m ./e2e/

soak-down:
	$(SOAK_STACK) $(STACK) down

## stack-up / stack-down / stack-status: the local real stack (e2e/stack)
stack-up:
	$(STACK) up

stack-down:
	$(STACK) down

stack-status:
	$(STACK) status

## stack-clean: stop the stack and delete all of its state
stack-clean: stack-down
	rm -rf .stack

## stack-secure-up / -down / -status / -clean: the secured variant of the local stack (docs/development.md
## "The local stack", "Security"): a CA of its own, a KDC, kerberized HDFS and metastores, Kafka
## SASL_SSL with per-role SCRAM users and ACLs, the registry over mutual TLS with basic auth;
## state in .stack-secure, every port +3000 (lib.sh
## decides both; a HIVEDR_STACK_DIR or HIVEDR_STACK_PORT_OFFSET meant for the plain stack is ignored)
SECURE_STACK := env -u HIVEDR_STACK_DIR -u HIVEDR_STACK_PORT_OFFSET HIVEDR_STACK_SECURE=1 $(STACK)
stack-secure-up:
	$(SECURE_STACK) up

stack-secure-down:
	$(SECURE_STACK) down

stack-secure-status:
	$(SECURE_STACK) status

stack-secure-clean: stack-secure-down
	rm -rf .stack-secure

## stack-privacy-up / -down / -status / -clean: the secured stack with wire privacy everywhere
## (docs/security.md "Wire privacy"): RPC privacy on both HDFS clusters, encrypted data transfer
## with AES, SASL QOP auth-conf on both metastores; state in .stack-privacy, every port +4000
PRIVACY_STACK := env -u HIVEDR_STACK_DIR -u HIVEDR_STACK_PORT_OFFSET HIVEDR_STACK_SECURE=1 HIVEDR_STACK_PRIVACY=1 $(STACK)
stack-privacy-up:
	$(PRIVACY_STACK) up

stack-privacy-down:
	$(PRIVACY_STACK) down

stack-privacy-status:
	$(PRIVACY_STACK) status

stack-privacy-clean: stack-privacy-down
	rm -rf .stack-privacy

## demo: the whole pipeline end to end on the local stack: starts the stack and the three daemons,
## runs a workload on database finance, shows the DR catching up, stops the daemons (e2e/demo/run.sh)
demo: stack-up
	@GO="$(GO)" bash e2e/demo/run.sh
