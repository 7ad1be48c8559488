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

.PHONY: build dist image image-context release setup setup-tests demo test test-exactly test-cluster test-faults test-matrix test-analytics test-engine test-kafka4 test-short bench bench-analytics bench-compare bench-backfill bench-messages fuzz fuzz-short clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/outbox-cdc ./cmd/outbox-cdc

# Versioned, static release archives in dist/, and .deb and .rpm packages
# for linux (nfpm, pinned in tools/go.mod; deploy/packages/nfpm.yaml), each
# with an SPDX SBOM, and SHA256SUMS.
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

# Archives, packages, SBOMs, the image and SHA256SUMS of them all, in dist/ (the
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

# The integration suite again with --delivery exactly-once: each test's
# relay writes Kafka transactions and the tests read at read_committed
# (internal/testkit: OUTBOX_TEST_DELIVERY). About 9 minutes; not in
# .ci/run, which runs exactly-once's own tests in test-faults.
test-exactly: setup-tests
	OUTBOX_TEST_DELIVERY=exactly-once $(GO) test -race -count=1 -timeout 15m ./test/integration/

# outbox-cdc against a three-broker Kafka cluster under broker faults (about
# 3 minutes; .ci/run runs it after make test).
test-cluster:
	$(GO) test -tags cluster -race -count=1 -timeout 14m ./test/cluster/

# The fault tests that take half a minute or more each (a broker killed for
# a while, 20 kill -9 under load), a kill -9 under --cleanup that has
# failed under heavy load (see TestCleanupDeleteAfterPublish), and
# exactly-once delivery's (20 kill -9, a frozen instance's takeover, a
# million-row transaction killed half-way), and a lost slot's heals (a
# failover, a restore, exactly-once, two instances racing) and the
# watchdog's frozen replication loop, a cutover killed and Postgres's own
# faults (a walsender terminated, a restart), and three tests slow for what
# they start (the alert rules on a real Prometheus, a million-row
# transaction, a TLS and SASL broker): make test skips them to stay under 10
# minutes; .ci/run runs them after make test (about 8 minutes).
test-faults: setup-tests
	OUTBOX_CDC_TEST_FAULTS=1 $(GO) test -race -count=1 -timeout 12m -run 'TestBrokerOutage|TestRepeatedCrashes|TestCleanupDeleteAfterPublish$$|TestExactlyOnce|TestSlotHeal|TestSlotRecorded|TestWatchdogStops|TestCutoverKilled$$|TestPostgresFaults|TestAlertsOnPrometheus|TestHugeTransaction|TestKafkaTLSAndSASL' ./test/integration/

# The tests whose outcome can depend on the PostgreSQL version (slots,
# pgoutput, snapshots, failover slots, TLS, the backfill's SQL), on every other
# supported major: make test runs them all on 15. The three slow ones run
# where their SQL or slots change: the cutover and the backfill's snapshot
# (pg_current_snapshot and friends, the same since 13) on 18 beside 15;
# the failover (failover slots from 17) on 17 and 18 beside 15's older
# path. The heal after max_slot_wal_keep_size reads why the slot was lost
# (invalidation_reason from 17, wal_status before) on each. About 2 minutes on 18, 1 on 14, 16 and 17; .ci/run runs it.
MATRIX ?= 14 16 17 18
CORE := TestEndToEnd|TestMessages$$|TestSlotHealAfterWALRemoved|TestLeastPrivilegeRole|TestStartupErrors|TestSlotFailoverByVersion|TestSlotInvalidated|TestFailover|TestSchemaChanges|TestCutover$$|TestPostgresTLS|TestRestartAfterSIGTERM|TestBackfillWhereRunsNothing|TestBackfillResumeReadsItsSnapshot|TestRenameUnderLoad
SLOW_SNAPSHOT := TestCutover|TestBackfillResumeReadsItsSnapshot
test-matrix: setup-tests
	set -e; for v in $(MATRIX); do \
		case $$v in 14|16) skip='^($(SLOW_SNAPSHOT)|TestFailover)$$';; 17) skip='^($(SLOW_SNAPSHOT))$$';; *) skip='';; esac; \
		echo "== PostgreSQL $$v"; PG_VERSION=$$v $(GO) test -race -count=1 -timeout 8m -run '$(CORE)' -skip "$$skip" ./test/integration/; done

# The broker matrix: the tests a broker's version can change, on Apache
# Kafka 4.x (KRaft only; transaction protocol v1 for kafka-go's versions,
# pinned by producer's TestNegotiatedVersions) beside the 3.9.1 of every
# other target: the end-to-end test, exactly-once under 20 kill -9 and its
# frozen takeover, and a leader and a coordinator killed in the
# three-broker cluster. About 3 minutes; .ci/run runs it.
KAFKA4 ?= 4.1.1
test-kafka4: setup-tests
	KAFKA_VERSION=$(KAFKA4) scripts/kafka.sh fetch
	KAFKA_VERSION=$(KAFKA4) OUTBOX_CDC_TEST_FAULTS=1 $(GO) test -race -count=1 -timeout 8m -run '^(TestEndToEnd|TestExactlyOnce|TestExactlyOnceCrashes|TestExactlyOnceFrozenTakeover)$$' ./test/integration/
	KAFKA_VERSION=$(KAFKA4) $(GO) test -tags cluster -race -count=1 -timeout 8m -run '^(TestLeaderKilled|TestExactlyLeaderKilled|TestExactlyCoordinatorKilled)$$' ./test/cluster/

# The analytics tests that wait: a compacted topic's cleaner (make test runs
# the same test without that wait), one of two clusters down for 30 s
# beside the other's relay (two relays, one outbox, --where), and a real
# schema registry (Apicurio Registry 3 from Maven Central; it needs Java 21+,
# which scripts/apicurio.sh finds, or APICURIO_VERSION=2.6.13.Final on Java
# 17). About 2½ minutes (2 min 18 s measured).
test-analytics: setup-tests
	scripts/apicurio.sh fetch
	OUTBOX_CDC_TEST_COMPACTION=1 OUTBOX_CDC_TEST_TARGETS=1 OUTBOX_CDC_TEST_REGISTRY=1 $(GO) test -race -count=1 -timeout 8m -run 'TestTombstonesCompact|TestTargetsOutage|TestSchemaRegistry$$' ./test/integration/

# Apache Spark (pyspark from PyPI, its Kafka source from Maven Central; ~380 MB
# under ~/.cache/outbox-cdc, ~30 s, once) counts a topic's structured
# CloudEvents by type, read_committed, after a kill -9 of the relay, in each
# delivery: at least once distinct ids = committed rows per type, exactly once
# records = committed rows (about 50 s once installed).
test-engine: setup-tests
	SETUP_ENGINE=1 scripts/setup.sh
	scripts/analytics/spark.sh fetch
	OUTBOX_CDC_TEST_ENGINE=1 $(GO) test -race -count=1 -timeout 20m -run 'TestEngine' ./test/integration/

# The unit tests (only Go needed), then the hostile-input fuzz targets a few
# seconds each (fuzz-short).
test-short:
	$(GO) test -short -race -count=1 ./...
	$(MAKE) fuzz-short

# What a broker's answer and a row can feed the relay, fuzzed for a few
# seconds each from the committed corpora (testdata/fuzz/): the Kafka
# response reader (internal/kwire's check before kafka-go decodes) and the
# envelope builders. A finding is written to testdata/fuzz/ and fails.
# The budget is a count of runs, never a duration: with a duration, Go's
# fuzz coordinator before 1.27 can fail a target that found nothing, printing
# "context deadline exceeded" as the time runs out (golang/go#75804, fixed in
# Go 1.27); a count sets no deadline. 25,000 runs take 4-9 s here.
FUZZTIME ?= 25000x
fuzz-short:
	$(GO) test -run '^$$' -fuzz '^FuzzReadResponse$$' -fuzztime $(FUZZTIME) ./producer/
	$(GO) test -run '^$$' -fuzz '^FuzzEnvelopes$$' -fuzztime $(FUZZTIME) ./sink/

# The default scenarios, then what contracts and the structured envelopes
# cost per event (bench-analytics).
bench:
	$(GO) run ./cmd/outbox-bench
	$(MAKE) bench-analytics

# outbox-cdc as it ships beside the same relay with payload contracts (the
# bench's own contract, contract/testdata/bench) and with each structured
# envelope: a 100,000-event drain and 5,000 tx/s, 3 rounds in rotated order,
# with CPU per event of the relay, the walsender and the broker (about 12
# minutes).
ANALYTICS_VARIANTS := outbox-cdc,outbox-cdc+--contracts=$(CURDIR)/contract/testdata/bench+name:contracts,outbox-cdc+--envelope=cloudevents-structured+name:cloudevents-structured,outbox-cdc+--envelope=connect-json+name:connect-json
bench-analytics:
	$(GO) run ./cmd/outbox-bench -compare -contenders "$(ANALYTICS_VARIANTS)" -loads 5000x1 -runs 3 -phase 20s -backlog 100000 -ceiling=false -kill-dups=false -out bench-results/analytics

# outbox-cdc at least once and exactly once beside Debezium on Kafka Connect
# standalone and exactly once on Connect distributed (resolved by
# scripts/debezium.sh), on one Postgres and broker, 3 rounds in rotated order;
# each round also kills each relay with SIGKILL under load and counts what a
# read_committed consumer reads twice or never (-kill-dups). 7000x1 is there
# for the capacity line (the highest single-row rate each relay sustains
# with p99 under 100 ms). About an hour; CI does not run it.
COMPARE_CONTENDERS := outbox-cdc,outbox-cdc+--delivery=exactly-once+name:exactly-once,debezium,debezium-eos
bench-compare:
	$(GO) run ./cmd/outbox-bench -compare -contenders "$(COMPARE_CONTENDERS)" -loads 1000x1,3000x1,5000x1,7000x1 -runs 3 -backlog 100000 -kill-dups

# A 100,000-row --backfill-where backfill in at-least-once and exactly-once,
# 3 rounds in rotated order (about a minute).
bench-backfill: setup
	scripts/bench-backfill.sh

# Events as outbox rows against events as logical decoding messages: the
# writer's commits/s and WAL per event, and a backlog drained (about 3 minutes).
bench-messages:
	$(GO) run ./cmd/outbox-bench -messages

fuzz:
	$(GO) test -run XXX -fuzz FuzzDecode -fuzztime 500000x ./decode/
	$(GO) test -run XXX -fuzz FuzzDecode -fuzztime 250000x ./message/
	$(MAKE) fuzz-short FUZZTIME=300000x

clean:
	rm -rf bin dist
