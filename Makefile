# oncehook: `make run` for the demo, `make test` for everything the tests need.
SHELL := /bin/bash
BIN   := $(CURDIR)/.bin
SQLC_VERSION  := v1.31.1
TEMPL_VERSION := v0.3.1100
# Stripe's official API mock, for the backfill tests (internal/provider/stripe_mock_test.go
# reads this line, and builds the binary itself when .bin/ lacks it).
STRIPE_MOCK_VERSION := v0.203.0
export PATH := $(BIN):$(PATH)
# Build, test and scan with go.mod's toolchain line, fetched through the module proxy
# when the machine's Go is older (its go.env says GOTOOLCHAIN=local).
export GOTOOLCHAIN := auto

.PHONY: run test test-citus generate check-generated tools vet build bench bench-growth chromium postgres image podman

## run: the demo: embedded Postgres, example config, sandbox CRM and mail, demo traffic
run: build postgres
	$(BIN)/oncehook demo

## postgres: the PostgreSQL server binaries the embedded database starts from (initdb,
## pg_ctl, postgres), found where the launcher looks (db/embedded_bin.go: PATH, then the
## distributions' versioned directories). When missing: as root with apt-get, Debian's
## package, which puts them under /usr/lib/postgresql/NN/bin; otherwise the command to
## run is printed and make stops.
PG_DIRS = $(subst :, ,$(PATH)) /usr/lib/postgresql/*/bin /usr/pgsql-*/bin \
	/opt/homebrew/opt/postgresql@*/bin /usr/local/opt/postgresql@*/bin
postgres:
	@for d in $(PG_DIRS); do \
		if [ -x "$$d/initdb" ] && [ -x "$$d/pg_ctl" ] && [ -x "$$d/postgres" ]; then exit 0; fi; \
	done; \
	if ! command -v apt-get >/dev/null; then \
		echo "make run needs PostgreSQL 14 or newer (initdb, pg_ctl, postgres): install its server"; \
		echo "package from your system's packages, e.g. 'brew install postgresql@17' or"; \
		echo "'dnf install postgresql-server', then run make run again"; exit 1; \
	elif [ "$$(id -u)" != 0 ]; then \
		echo "make run needs PostgreSQL 14 or newer (initdb, pg_ctl, postgres); install it with"; \
		echo "  sudo apt-get update && sudo apt-get install -y postgresql"; \
		echo "then run make run again"; exit 1; \
	else \
		echo "installing PostgreSQL for the embedded database (Debian's postgresql package)"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql; \
	fi

build:
	go build -o $(BIN)/oncehook ./cmd/oncehook

## test: generated code is current, vet, and the whole suite with the race detector
## (the Helm chart's test is a module of its own, so ./... does not reach it). The
## packages run TEST_P at a time: most of their time is spent waiting on Postgres,
## servers and browsers, not on the two cores. The tests whose assertion is a latency
## bound (ALONE) then run by themselves, so that the other packages' load does not
## decide them.
TEST_P ?= 3
ALONE  := TestOneClientsBurstDoesNotDelayAnother
test: tools chromium podman check-generated vet
	go test -race -count=1 -p $(TEST_P) -timeout 20m -skip '^($(ALONE))$$' ./...
	go test -race -count=1 -timeout 10m -run '^($(ALONE))$$' ./internal/ledger/
	cd deploy/helm && go test -count=1 -timeout 10m ./...

## chromium: Debian's headless browser for the dashboard tests, installed only when missing
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
		echo "installing chromium for the browser tests"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; fi

## podman: Debian's podman and runc, for the image test (deploy/image_test.go), installed
## only when missing
podman:
	@if ! command -v podman >/dev/null || ! command -v runc >/dev/null; then \
		echo "installing podman and runc for the image test"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y podman runc; fi

## image: the container image oncehook:latest (IMAGE=name:tag), built FROM scratch with
## podman or buildah: a static binary, CA certificates, zoneinfo, a non-root user
IMAGE ?= oncehook:latest
image:
	deploy/build-image $(IMAGE)

vet:
	go vet ./...
	cd deploy/helm && go vet ./...

## bench: throughput, latency, growth and memory against a baseline measured on the
## same private Postgres in the same run; prints one table, also in artifacts/bench.txt
bench:
	go run ./cmd/bench -out artifacts/bench.txt

## bench-growth: the growth rows alone at 1,000, 1,000,000 and 10,000,000 actions (the
## history filled in about a quarter of an hour on 2 cores; needs about 30 GB free under /tmp)
bench-growth:
	go run ./cmd/bench -growth-only -peer off -rows 10000000 -out artifacts/bench-growth.txt

## generate: regenerate sqlc queries and templ views from their sources
generate: tools
	sqlc generate -f db/sqlc.yaml
	if ls views/*.templ >/dev/null 2>&1; then templ generate -path views; fi

## check-generated: fail when the committed generated code does not match its sources
GENERATED = ls db/*.sql.go db/sqlc_*.go views/*_templ.go 2>/dev/null | sort | xargs -r sha256sum
check-generated: tools
	@before="$$($(GENERATED))"; $(MAKE) --no-print-directory generate >/dev/null; \
	after="$$($(GENERATED))"; \
	if [ "$$before" != "$$after" ]; then \
		echo "generated code did not match its sources (now regenerated): commit the result"; \
		diff <(echo "$$before") <(echo "$$after"); exit 1; fi

tools: $(BIN)/sqlc $(BIN)/templ $(BIN)/stripe-mock

$(BIN)/sqlc:
	GOBIN=$(BIN) go install github.com/sqlc-dev/sqlc/cmd/sqlc@$(SQLC_VERSION)

$(BIN)/templ:
	GOBIN=$(BIN) go install github.com/a-h/templ/cmd/templ@$(TEMPL_VERSION)

$(BIN)/stripe-mock:
	GOBIN=$(BIN) go install github.com/stripe/stripe-mock@$(STRIPE_MOCK_VERSION)

## test-citus: the ledger, inbox, review, API and dashboard (web), fault, history
## (3 seeds), cutover and partition suites against a local Citus cluster: db/dbtest starts a coordinator and two
## workers from the machine's PostgreSQL with Citus preloaded (ONCEHOOK_TEST_CITUS=1), a
## cluster for each package, TEST_P packages at a time, then the ALONE tests by
## themselves. Citus comes from Citus's own packages, or ../shared/citus/build.sh;
## without it this stops with the one line that says so.
CITUS_PKGS ?= ./internal/ledger/ ./internal/alerts/ ./internal/inbox/ ./internal/review/ ./web/ ./internal/faults/ ./internal/cutover/ ./internal/partitions/
test-citus: tools
	@for d in $(PG_DIRS); do \
		if [ -x "$$d/postgres" ]; then \
			d="$$(dirname "$$(readlink -f "$$d/postgres")")"; \
			lib="$$d/../lib"; [ -x "$$d/pg_config" ] && lib="$$("$$d/pg_config" --pkglibdir)"; \
			if [ -f "$$lib/citus.so" ]; then exit 0; fi; \
			echo "make test-citus needs Citus in PostgreSQL ($$d): install it from Citus's packages (https://docs.citusdata.com/en/stable/installation/multi_node.html), or run ../shared/citus/build.sh"; exit 1; \
		fi; \
	done; echo "make test-citus needs PostgreSQL with Citus: install PostgreSQL, then Citus from Citus's packages"; exit 1
	ONCEHOOK_TEST_CITUS=1 go test -race -count=1 -p $(TEST_P) -timeout 60m -skip '^($(ALONE))$$' $(CITUS_PKGS)
	ONCEHOOK_TEST_CITUS=1 go test -race -count=1 -timeout 10m -run '^($(ALONE))$$' ./internal/ledger/

# ---- fault tests, fuzzing and the vulnerability check (issue 6) ----
.PHONY: test-faults histories fuzz vuln

## test-faults: the fault, load and hostile-input tests alone (`make test` runs them too):
## real oncehook processes on real Postgres clusters that are stopped, killed and flooded
test-faults:
	go test -count=1 -timeout 15m ./internal/faults/...

## histories: N seeded randomized histories against real processes (internal/faults/histories_test.go);
## `make test` runs 3. SEED=S starts the series at S (history i has seed S+i; a failing
## history prints its seed and replays with N=1 SEED=that). The figures land in
## artifacts/histories.txt.
N ?= 200
SEED ?= 0
histories:
	@mkdir -p artifacts
	go test -count=1 -timeout 0 -run '^TestHistories$$' ./internal/faults \
		-histories.n=$(N) -histories.seed=$(SEED) -histories.keep-going -histories.summary=$(CURDIR)/artifacts/histories.txt
	@cat artifacts/histories.txt

## fuzz: every fuzz target of the module in turn, FUZZTIME each; a failing input is
## written to testdata/fuzz. CI counts executions (5000x) rather than seconds: a
## duration budget can end in a spurious "context deadline exceeded" on a busy machine
## (a race in Go's fuzz coordinator, golang/go#75804, fixed in Go 1.27). Dig deeper
## with `make fuzz FUZZTIME=10m`.
FUZZTIME ?= 5000x
fuzz:
	@set -euo pipefail; \
	targets=$$(grep -rHo --include='*_test.go' --exclude-dir=.git '^func Fuzz[A-Za-z0-9_]*' . | \
		sed 's|^\(.*\)/[^/]*:func \(.*\)$$|\1:\2|' | sort -u); \
	for t in $$targets; do \
		echo "fuzz $${t#*:} ($${t%%:*}) for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) "$${t%%:*}"; \
	done

## vuln: govulncheck over the module; fails on findings not in .ci/vuln-accepted
GOVULNCHECK_VERSION := v1.9.0
VULNDB_VERSION      := v0.0.0-20261105234957-e22db6528018
vuln: $(BIN)/govulncheck
	.ci/vulncheck $(VULNDB_VERSION)

$(BIN)/govulncheck:
	GOBIN=$(BIN) go install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION)
