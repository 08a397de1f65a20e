# oncehook: `make run` for the demo, `make test` for everything the tests need.
SHELL := /bin/bash
BIN   := $(CURDIR)/.bin
SQLC_VERSION  := v1.31.1
TEMPL_VERSION := v0.3.1100
export PATH := $(BIN):$(PATH)

.PHONY: run test generate check-generated tools vet build bench chromium

## run: the demo: embedded Postgres, example config, sandbox CRM and mail, demo traffic
run: build
	./oncehook demo

build:
	go build -o oncehook ./cmd/oncehook

## test: generated code is current, vet, and the whole suite with the race detector
test: tools chromium check-generated vet
	go test -race -count=1 -timeout 20m ./...

## chromium: Debian's headless browser for the dashboard tests, installed only when missing
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
		echo "installing chromium for the browser tests"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; fi

vet:
	go vet ./...

## bench: throughput, latency, growth and memory against a baseline measured on the
## same private Postgres in the same run; prints one table, also in artifacts/bench.txt
bench:
	go run ./bench -out artifacts/bench.txt

## generate: regenerate sqlc queries and templ views from their sources
generate: tools
	sqlc generate
	if ls views/*.templ >/dev/null 2>&1; then templ generate -path views; fi

## check-generated: fail when the committed generated code does not match its sources
GENERATED = ls db/*.sql.go db/sqlc_*.go views/*_templ.go 2>/dev/null | sort | xargs -r sha256sum
check-generated: tools
	@before="$$($(GENERATED))"; $(MAKE) --no-print-directory generate >/dev/null; \
	after="$$($(GENERATED))"; \
	if [ "$$before" != "$$after" ]; then \
		echo "generated code did not match its sources (now regenerated): commit the result"; \
		diff <(echo "$$before") <(echo "$$after"); exit 1; fi

tools: $(BIN)/sqlc $(BIN)/templ

$(BIN)/sqlc:
	GOBIN=$(BIN) go install github.com/sqlc-dev/sqlc/cmd/sqlc@$(SQLC_VERSION)

$(BIN)/templ:
	GOBIN=$(BIN) go install github.com/a-h/templ/cmd/templ@$(TEMPL_VERSION)
