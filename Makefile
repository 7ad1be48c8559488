# outbox-cdc. `make demo` runs the whole job on throwaway local servers;
# `make test` runs every test against a real PostgreSQL and a real Kafka.

GO ?= go
VERSION ?= $(shell scripts/release.sh version 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# Release targets for `make dist` and `make image` (scripts/release.sh).
PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
RELEASE := VERSION=$(VERSION) COMMIT=$(COMMIT) PLATFORMS="$(PLATFORMS)" IMAGE_PLATFORMS="$(IMAGE_PLATFORMS)" scripts/release.sh

.PHONY: build dist image image-context release setup setup-tests demo test test-cluster test-matrix test-analytics test-short bench bench-compare bench-messages fuzz clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/outbox-cdc ./cmd/outbox-cdc

# Versioned, static release archives in dist/, each with an SPDX SBOM, and
# SHA256SUMS.
dist:
	$(RELEASE) dist

# The image's build context (static linux binaries and CA certificates in
# bin/image/), for `docker build .` and docker-compose.yml.
image-context:
	$(RELEASE) context

# The OCI image for linux/amd64 and linux/arm64, built from the Dockerfile
# with buildah (apt-get install buildah; no Docker engine, no registry), as
# a multi-arch OCI archive in dist/.
image:
	$(RELEASE) image

# Archives, SBOMs, the image and SHA256SUMS of them all, in dist/ (the
# version is `git describe --tags`; tag first: git tag v0.1.0).
release:
	$(RELEASE) release

# What the demo and the tests need, installed or fetched once (Java, Maven,
# Kafka's jars, PostgreSQL's binaries; for the tests also Prometheus and
# buildah): see scripts/setup.sh.
setup:
	scripts/setup.sh

setup-tests:
	SETUP_TESTS=1 scripts/setup.sh

demo: setup
	scripts/demo.sh

# Every test, on PostgreSQL $(PG_VERSION) (default 15) and one Kafka broker.
test: setup-tests
	$(GO) test -race -count=1 -timeout 15m ./...

# outbox-cdc against a three-broker Kafka cluster under broker faults (about
# 3 minutes; .ci/run runs it after make test).
test-cluster:
	$(GO) test -tags cluster -race -count=1 -timeout 14m ./test/cluster/

# The tests whose outcome can depend on the PostgreSQL version (slots,
# pgoutput, snapshots, failover slots, TLS, the backfill's SQL), on every other
# supported major: make test runs them all on 15 (about 2 minutes a version;
# .ci/run runs it).
MATRIX ?= 14 16 17 18
CORE := TestEndToEnd|TestMessages$$|TestLeastPrivilegeRole|TestStartupErrors|TestSlotFailoverByVersion|TestSlotInvalidated|TestFailover|TestSchemaChanges|TestCutover$$|TestPostgresTLS|TestRestartAfterSIGTERM|TestBackfillWhereRunsNothing|TestBackfillResumeReadsItsSnapshot|TestRenameUnderLoad
test-matrix: setup-tests
	set -e; for v in $(MATRIX); do echo "== PostgreSQL $$v"; PG_VERSION=$$v $(GO) test -race -count=1 -timeout 8m -run '$(CORE)' ./test/integration/; done

# The analytics tests that wait on the broker (a compacted topic's cleaner:
# about a minute); make test runs the same tests without that wait.
test-analytics: setup-tests
	OUTBOX_CDC_TEST_COMPACTION=1 $(GO) test -race -count=1 -timeout 5m -run 'TestTombstonesCompact' ./test/integration/

test-short:
	$(GO) test -short -race -count=1 ./...

bench:
	$(GO) run ./cmd/outbox-bench

# outbox-cdc beside Debezium (resolved by scripts/debezium.sh) on one Postgres
# and broker, 3 rounds in alternating order (about 25 minutes; CI does not run it).
bench-compare:
	$(GO) run ./cmd/outbox-bench -compare

# Events as outbox rows against events as logical decoding messages: the
# writer's commits/s and WAL per event, and a backlog drained (about 3 minutes).
bench-messages:
	$(GO) run ./cmd/outbox-bench -messages

fuzz:
	$(GO) test -run XXX -fuzz FuzzDecode -fuzztime 60s ./decode/
	$(GO) test -run XXX -fuzz FuzzDecode -fuzztime 30s ./message/

clean:
	rm -rf bin dist
