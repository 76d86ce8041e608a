# Payment Request Service. `make dev` runs everything locally; `make test` runs every test.
SHELL := /bin/bash

# Lambda functions: directory under functions/ and template logical id.
FUNCTIONS := merchantapi checkout notifier reconciler payments callbacks sandbox batch sftpauth dashboard audit

GO_LAMBDA_BUILD := GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -tags lambda.norpc -trimpath -ldflags="-s -w -buildid="
# SAM passes ARTIFACTS_DIR to build-<LogicalId>; `make build` uses bin/<function>/.
ARTIFACTS_DIR ?= bin/manual

EMULATORS := infra/local/node_modules/.package-lock.json

.PHONY: dev test test-short bench batch-million audit-million chaos lint build clean api-lint api-docs screenshots

# Ports of `make dev` (127.0.0.1): PORT for the API, SFTP_PORT for the SFTP
# server. Another PORT runs a second stack side by side: its SFTP port then
# defaults to PORT-778 (3001 → 2223) and its state to .paydev-PORT, so
# `make dev PORT=3001` does not touch the first stack's .paydev/stack.json.
PORT ?= 3000
SFTP_PORT ?= $(if $(filter 3000,$(PORT)),2222,$(if $(filter 0,$(PORT)),0,$(shell expr $(PORT) - 778)))
STATE_DIR ?= $(if $(filter 3000,$(PORT)),.paydev,.paydev-$(PORT))

dev: $(EMULATORS)
	@mkdir -p .paydev/bin
	go build -o .paydev/bin/paydev ./cmd/paydev
	exec .paydev/bin/paydev -port $(PORT) -sftp-port $(SFTP_PORT) -state-dir $(STATE_DIR)$(if $(STAGE), -stage $(STAGE))$(if $(FAULTS), -faults)

# Every test once: unit tests, and the integration tests on the emulators
# they start (DynamoDB Local, fauxqs; docs/testing.md). The longest packages
# are named first: go test starts packages in the order given (./... adds the
# others once each); last in path order, one would start when most of the
# run is over and then run alone. Two test binaries at a time (Go's default
# on two cores): three took 18 min 23 s against 15 min 38 s, their emulators
# contending for the cores (docs/testing.md). Test binaries are linked
# without symbol table and DWARF (-s -w; stack traces keep their names): a
# relink of the dashboard's took 5.2 s of CPU instead of 7.2.
SLOWEST_PACKAGES = ./internal/testing/lostanswer/ ./internal/dashboard/ ./internal/testing/crashtest/ ./internal/browsertest/ ./internal/provider/stripe/
test: $(EMULATORS)
	go test -trimpath -ldflags='-s -w' -count=1 -timeout 40m $(SLOWEST_PACKAGES) ./...

# The fast suite: unit tests, the in-memory store's half of its contract
# test, no emulator, browser, SFTP client or stack (docs/testing.md). Not a
# substitute for `make test`, which runs everything. go vet is left to
# `make test` and `make lint`, which run it on every package.
test-short:
	go test -trimpath -short -count=1 -vet=off ./...

# The service/ceiling table of every path (internal/testing/bench,
# docs/testing.md), then every Benchmark (the 100,000-row batch file among them).
bench: $(EMULATORS)
	go test -tags bench -count=1 -run '^TestBench$$' -v -timeout 30m ./internal/testing/bench/
	@# The acquirer's budget under batch load (docs/batch.md): 5 merchants x 20,000 rows.
	go test -tags bench -count=1 -run '^TestBenchAcquirerShare$$' -v -timeout 90m ./internal/testing/bench/
	go test -run '^$$' -bench . -benchmem -timeout 60m ./...

# A 1,000,000-line file through the local emulators and the real payment
# service (docs/batch.md, "A million rows"): one result line per input line,
# every valid line charged exactly once; time and peak memory printed.
# Run it on an otherwise idle machine. DynamoDB Local keeps its tables in
# memory (SQLite's, beside the Java heap MILLION_HEAP bounds); with less
# memory, MILLION_DB=<dir> keeps them on disk.
MILLION_HEAP ?= 8g
batch-million: $(EMULATORS)
	$(if $(MILLION_DB),rm -rf $(MILLION_DB) && mkdir -p $(MILLION_DB))
	PAYREQ_DYNAMODB_LOCAL_TIERED=1 PAYREQ_DYNAMODB_LOCAL_HEAP=$(MILLION_HEAP) PAYREQ_DYNAMODB_LOCAL_DIR=$(MILLION_DB) PAYREQ_BENCH_ROWS=1000000 /usr/bin/time -v go test -run '^$$' -bench '^BenchmarkBatchFile100k$$' -benchtime 1x -benchmem -timeout 12h ./internal/batchproc/
	$(if $(MILLION_DB),rm -rf $(MILLION_DB))

# The invariant audit at volume (docs/operations.md, "The audit at
# volume"): AUDIT_ROWS paid payments seeded into DynamoDB Local while the
# stream consumer runs, then AuditFunction's scheduled run invoked back to
# back with its 60 s timeout until the full pass is done and a violation
# written after the last row is reported. Run it on an otherwise idle machine.
AUDIT_ROWS ?= 1000000
audit-million: $(EMULATORS)
	PAYREQ_DYNAMODB_LOCAL_TIERED=1 PAYREQ_DYNAMODB_LOCAL_HEAP=$(MILLION_HEAP) PAYREQ_AUDIT_ROWS=$(AUDIT_ROWS) /usr/bin/time -v go test -tags volume -count=1 -run '^TestAuditAtVolume$$' -v -timeout 24h ./internal/wire/auditwire/

# Soak: the local stack under mixed load, SIGKILLed 10 times at random
# moments and restarted; then the invariant audit must find nothing.
chaos: $(EMULATORS)
	go test -tags chaos -count=1 -timeout 20m -run '^TestChaos(Failover)?$$' -v ./internal/testing/crashtest/

lint:
	go vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# docs/openapi.yaml: Redocly and Spectral lint (0 errors, 0 warnings), and
# after a Redoc upgrade in infra/local, its bundle copied for /docs (docs/openapi.md).
api-lint: $(EMULATORS)
	go test -count=1 -run 'Lint' ./internal/apispec/

api-docs: $(EMULATORS)
	go test -count=1 -run '^TestRedocBundleIsThePinnedOne$$' ./internal/apispec/ -update

# docs/img/dashboard-*.png, desktop and phone, from the local stack in Chromium.
screenshots: $(EMULATORS)
	PAYREQ_SCREENSHOTS=1 go test -count=1 -run '^TestBrowser(DashboardJourney|DashboardScreenshots|PersonWithTwoMerchantsInTwoTabs)$$' ./internal/dashboard/

# Every function, linux/arm64, stripped: bin/<function>/bootstrap.
build:
	@for f in $(FUNCTIONS); do echo "build $$f"; $(GO_LAMBDA_BUILD) -o bin/$$f/bootstrap ./functions/$$f || exit 1; done
	@ls -l bin/*/bootstrap

clean:
	rm -rf bin .aws-sam .paydev/bin

$(EMULATORS): infra/local/package-lock.json
	cd infra/local && npm ci --no-audit --no-fund --loglevel=error

# sam build (BuildMethod: makefile) calls one target per function.
build-MerchantApiFunction:
	$(GO_LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/merchantapi

build-NotifierFunction:
	$(GO_LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/notifier

build-ReconcilerFunction:
	$(GO_LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/reconciler

build-PaymentsFunction:
	$(GO_LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/payments

build-CallbacksFunction:
	$(GO_LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/callbacks

build-SandboxFunction:
	$(GO_LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/sandbox

build-CheckoutFunction:
	$(GO_LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/checkout

build-DashboardFunction:
	$(GO_LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/dashboard

build-BatchFunction:
	$(GO_LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/batch

build-SftpAuthFunction:
	$(GO_LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/sftpauth

build-AuditFunction:
	$(GO_LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/audit
