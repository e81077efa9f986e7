# ledgerd: `make run` builds and starts the service on its embedded database; `make test` runs
# every test against the PostgreSQL at DATABASE_URL (default: the local server on 127.0.0.1:5432).

GO            ?= go
DATABASE_URL  ?= postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
export DATABASE_URL

.PHONY: all build run test deps vet fuzz bench generate check-generated

all: build

deps:
	bash scripts/install-deps.sh

build:
	$(GO) build -o bin/ledgerd ./cmd/ledgerd
	$(GO) build -o bin/costcalc ./cmd/costcalc

# run starts ledgerd on 127.0.0.1:8080 with its own PostgreSQL under ./.ledgerd (no DATABASE_URL
# needed; set LEDGERD_DATABASE_URL to use a server of your own).
run: build
	bash scripts/install-deps.sh postgresql
	DATABASE_URL="$(LEDGERD_DATABASE_URL)" ./bin/ledgerd serve

test: deps
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 20m ./...
	$(MAKE) check-generated

# fuzz runs each fuzz target for FUZZTIME and keeps what it found under testdata/fuzz.
FUZZTIME ?= 30s
fuzz:
	bash scripts/fuzz.sh $(FUZZTIME)

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x ./ingest/

generate:
	$(GO) tool templ generate

check-generated: generate
	@git diff --exit-code -- '*_templ.go' || (echo "generated files are stale: run make generate and commit" && exit 1)
