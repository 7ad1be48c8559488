# outbox-cdc. `make demo` runs the whole job on throwaway local servers;
# `make test` runs every test against a real PostgreSQL and a real Kafka.

GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: build demo test test-short bench fuzz clean

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/outbox-cdc ./cmd/outbox-cdc

demo:
	scripts/demo.sh

test:
	$(GO) test -race -count=1 -timeout 15m ./...

test-short:
	$(GO) test -short -race -count=1 ./...

bench:
	$(GO) run ./cmd/outbox-bench

fuzz:
	$(GO) test -run XXX -fuzz FuzzDecode -fuzztime 60s ./decode/

clean:
	rm -rf bin
