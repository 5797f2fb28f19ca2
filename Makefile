# Two commands do everything on a fresh clone: `make demo` and `make test`.
SHELL := /bin/bash
NPM ?= npm
PMLAKE := $(NPM) run -s pmlake --

.PHONY: install test-deps test demo cluster bench lint build serve ingest generate clean

# npm install (not `npm ci`: npm 11 rejects this lockfile's optional per-platform DuckDB bindings) when the lockfile changed or nothing is installed yet; a no-op otherwise.
node_modules/.installed: package.json package-lock.json
	$(NPM) install --no-audit --no-fund --loglevel=error
	@touch $@

# The npm packages: all that demo, serve, ingest, generate and lint need.
install: node_modules/.installed

# What the tests need beyond npm: Debian's chromium, unzip, python3, redis-server and postgresql (installed when
# missing and run as root; scripts/ensure-system-deps.sh says which test needs what).
test-deps: install
	@bash scripts/ensure-system-deps.sh

test: test-deps
	$(NPM) run -s lint
	$(NPM) test

demo: install
	$(PMLAKE) demo

# Two API replicas and one export worker on PostgreSQL, Redis and the embedded S3 server over the demo lake,
# behind a round-robin front on :8000 (scripts/cluster.ts; everything under cluster/, on loopback).
cluster: install
	@bash scripts/ensure-system-deps.sh redis-server postgresql
	node --max-semi-space-size=64 --import tsx scripts/cluster.ts

# The bench is its own entry point (bench/cli.ts); `pmlake bench` runs the same file as a child. Options: make bench ARGS='--scale small'.
# Its -pg and -redis rows start a throwaway PostgreSQL and redis-server.
bench: install
	@bash scripts/ensure-system-deps.sh redis-server postgresql
	$(NPM) run -s bench -- $(ARGS)

lint: install
	$(NPM) run -s lint

build: lint

serve: install
	$(PMLAKE) serve

ingest: install
	$(PMLAKE) ingest $(ARGS)

generate: install
	$(PMLAKE) generate $(ARGS)

clean:
	rm -rf cluster demo-data demo-live state
	find lake -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
