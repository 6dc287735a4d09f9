# hivedr — see README.md. `make test` and `make demo` are the two commands a
# new machine needs; everything they use is installed by the scripts.

SHELL   := /bin/bash
GO      ?= go
STACK   := bash e2e/stack/stack.sh
PKGS     = $(shell $(GO) list ./... | grep -v '/e2e$$')

.PHONY: all build test unit e2e vet fmt-check demo bench-tail bench-lag bench-copy stack-up stack-down stack-status stack-clean

all: build

## build: the hivedr binary in bin/
build:
	$(GO) build -o bin/hivedr ./cmd/hivedr

## test: unit tests, then the local stack up, then the e2e tests on it
test: vet unit stack-up e2e

## unit: tests that need no stack (kfake and pure code only)
unit:
	$(GO) test -count=1 $(PKGS)

## e2e: tests on the real local stack (fails if it is not up)
e2e:
	$(GO) test -count=1 -timeout 30m -v ./e2e/

vet: fmt-check
	$(GO) vet ./...
	$(GO) vet -tags benchlag ./e2e/

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); \
	if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi

## bench-tail: tailer throughput from a 200,000-event Postgres log into Kafka
bench-tail: stack-up
	$(GO) test -count=1 -run '^$$' -bench BenchmarkTailerPostgres -benchtime 1x -timeout 30m ./e2e/

## bench-lag: end-to-end lag (source event -> applied on DR) of the three daemons under a steady
## workload with files; BENCH_LAG_RATE events/s (default 100) for BENCH_LAG_SECONDS (default 60)
.PHONY: bench-lag
bench-lag: stack-up
	$(GO) test -tags benchlag -count=1 -run '^TestPipelineLag$$' -v -timeout 30m ./e2e/

## bench-copy: hivedr's copy engine against Hadoop DistCp, 1 GiB in 4 files and 10,000 files of 4 KiB
bench-copy: build stack-up
	HIVEDR_COPY_CMD="$(CURDIR)/bin/hivedr copy -log-level warn" bash e2e/bench/bench-copy.sh

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

## demo: the whole pipeline end to end on the local stack: starts the stack and the three daemons,
## runs a workload on database finance, shows the DR catching up, stops the daemons (e2e/demo/run.sh)
demo: stack-up
	@GO="$(GO)" bash e2e/demo/run.sh
