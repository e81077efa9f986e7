# ledgerd: `make run` builds and starts the service on its embedded database; `make test` runs
# every test against the PostgreSQL at DATABASE_URL (default: the local server on 127.0.0.1:5432).

GO            ?= go
DATABASE_URL  ?= postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
export DATABASE_URL

.PHONY: all build run test deps fuzz bench demo drills load generate check-generated check-platforms vendor-web

all: build

# deps installs the Debian packages the tests need (PostgreSQL server binaries, Chromium,
# Prometheus, Alertmanager); it does nothing when they are present.
deps:
	bash scripts/install-deps.sh

build:
	$(GO) build -o bin/ledgerd ./cmd/ledgerd
	$(GO) build -o bin/costcalc ./cmd/costcalc
	$(GO) build -o bin/ledgerload ./cmd/ledgerload

# run starts ledgerd on 127.0.0.1:8080 with its own PostgreSQL under ./.ledgerd (set
# LEDGERD_DATABASE_URL to use a server of your own instead).
run: build
	bash scripts/install-deps.sh postgresql
	DATABASE_URL="$(LEDGERD_DATABASE_URL)" ./bin/ledgerd serve $(RUN_ARGS)

# test runs every test: unit, PostgreSQL, browser (headless Chromium), Prometheus and Alertmanager
# end-to-end, the short reliability drills, the freshness of generated files and go.mod, and the
# builds for macOS and Windows.
test: deps
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 30m ./...
	$(MAKE) check-generated
	$(MAKE) check-platforms

# fuzz runs each fuzz target for FUZZTIME; a failing input is written under its package's
# testdata/fuzz, to commit with the fix (the fuzzer's corpus stays in the Go cache).
FUZZTIME ?= 30s
fuzz:
	bash scripts/fuzz.sh $(FUZZTIME)

# bench: ingest against raw COPY in one run (the median of five), 64 one-record clients in
# process and against the binary (at saturation, then paced at the target's 10,000 records/s; each
# followed by a bare net/http server under the same client, cmd/loadfloor, for the machine's speed),
# sustained batched ingest against the binary (live, then a week's backfill), the fold of a
# many-tenant backlog in chunks against one statement, and the analytics endpoints (the
# many-tenant ones too) against GROUP BY over raw rows.
bench:
	LEDGERD_BENCH_RECORDS=300000 $(GO) test -run '^$$' -bench 'IngestVsCopy' -benchtime 5x ./internal/drills/
	$(GO) test -run '^$$' -bench 'IngestSingle' -benchtime 1x ./internal/drills/
	bash scripts/ingest-load.sh 30s 64 1
	RATE=10000 bash scripts/ingest-load.sh 30s 64 1
	bash scripts/ingest-load.sh 60s 4 1000
	DAYS=7 bash scripts/ingest-load.sh 90s 4 1000
	$(GO) test -run '^$$' -bench 'FoldBacklog' -benchtime 1x ./ingest/
	$(GO) test -run '^$$' -bench . -benchtime 20x ./internal/analytics/

# demo: ledgerd on its own embedded database (.ledgerd-demo) with 30 days of synthetic history,
# on 127.0.0.1:8080 until Ctrl-C.
demo:
	bash scripts/install-deps.sh postgresql
	bash scripts/demo.sh

# drills: the long reliability drills (about 20 minutes); make test runs the short ones.
drills:
	LEDGERD_DRILLS=long $(GO) test -count=1 -v -timeout 60m -run '^Test' ./internal/drills/

# load: synthetic traffic to a running ledgerd, e.g.
#   make load LEDGERD_KEY=ldg_... LOAD_ARGS="--rate 2000 --duration 5m"
load:
	$(GO) run ./cmd/ledgerload --key "$(LEDGERD_KEY)" $(LOAD_ARGS)

generate:
	$(GO) tool templ generate
	$(GO) generate ./grafana/

# check-generated fails when a generated file is stale or go.mod and go.sum are not what
# `go mod tidy` makes them (a requirement no code imports, or one missing).
check-generated: generate
	@git diff --exit-code -- '*_templ.go' grafana/dashboards || (echo "generated files are stale: run make generate and commit" && exit 1)
	@$(GO) mod tidy -diff || (echo "go.mod or go.sum is not tidy: run go mod tidy and commit" && exit 1)

# check-platforms builds for the systems engineers work on besides Linux: all of ledgerd for macOS
# (the embedded database runs there with the PostgreSQL on PATH or at --pg-binaries), and for
# Windows what runs without the service and its embedded database: the client, the record
# contract, the catalog, money, costcalc and the load generator.
check-platforms:
	GOOS=darwin GOARCH=arm64 $(GO) build ./...
	GOOS=windows GOARCH=amd64 $(GO) build ./client ./schema ./pricing ./money ./cmd/costcalc ./cmd/ledgerload

vendor-web:
	bash scripts/vendor-web.sh
