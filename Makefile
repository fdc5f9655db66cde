# The README's two commands: `make run` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

GO ?= go
SLUICE_DATA_DIR ?= .sluice
SLUICE_LISTEN ?= 127.0.0.1:8080
# -vet=off: make test runs go vet over every package (tests included) before
# the tests, so go test's own smaller vet pass would only repeat it. -w: test
# binaries without DWARF link a quarter faster; panics and race reports do
# not need it (they read the symbol table).
# -p and -parallel: the defaults are the CPU count (2 here), but most tests
# wait (for a process to start, a probe, a timeout) rather than compute:
# with 2 packages at a time and 2 tests in each, internal/services used 95 s
# of CPU in 244 s. -p 3 keeps a slot for cmd/sluice, the longest package, and
# two for the rest; where timing-sensitive tests flake on a busy machine,
# GOTEST_FLAGS can take the defaults back.
GOTEST_FLAGS ?= -race -count=1 -timeout 15m -vet=off -ldflags=-w -p 3 -parallel 4
# ./bin holds what the Makefile builds, Terraform too when the machine has none.
export PATH := $(CURDIR)/bin:$(PATH)

.PHONY: run test test-go test-generated build static demo-artifacts vet generate check-generated check-contract ensure-tools ensure-browser tools bench bench-sync faults clean fuzz console

## run: build sluice and serve it on an embedded PostgreSQL in $(SLUICE_DATA_DIR)
run: ensure-tools build demo-artifacts
	@bash scripts/run.sh bin/sluice "$(SLUICE_DATA_DIR)" "$(SLUICE_LISTEN)"

## test: vet, check generated code is fresh, build, and run every test
# scripts/test.sh runs the phases: tools, vet, build and tests in line, and
# beside them the browser's install and the generated strand (generators,
# generate-check, contract-check). Each prints its wall and CPU time.
PHASE := @scripts/phase.sh
SUBMAKE := $(MAKE) --no-print-directory
test:
	@MAKE="$(SUBMAKE)" scripts/test.sh

# test-generated: the generated strand of make test, each step a phase.
test-generated:
	$(PHASE) generate-check $(SUBMAKE) check-generated
	$(PHASE) contract-check $(SUBMAKE) check-contract

## test-go: every test, alone (make test runs it last)
# The slowest test packages go first: go test starts packages in the order
# given (each once), and a long one started last runs alone at the end while
# the other slots wait. The console's one browser test cannot be split, so
# it starts early.
SLOW_PKGS := ./cmd/sluice ./internal/services ./internal/console ./internal/gitops ./httpapi ./internal/gitsync ./internal/infra ./internal/journal
# Tests that print a figure for CI (the API's property run) append it to
# $$SLUICE_TEST_REPORT, printed after the run. The tests' temporary files (the
# PostgreSQL cluster, repositories, working trees) go to a tmpfs when the
# machine has one with room (scripts/test-tmpdir.sh says why); set
# SLUICE_TEST_TMPDIR to choose the place.
test-go:
	@tmp=$$(scripts/test-tmpdir.sh); report=$$tmp/report; : > "$$report"; status=0; begin=$$(date +%s); \
	  echo "test files in $$tmp"; \
	  TMPDIR=$$tmp SLUICE_TEST_REPORT=$$report $(GO) test $(GOTEST_FLAGS) $(SLOW_PKGS) ./... || status=$$?; \
	  cat "$$report"; rm -rf "$$tmp"; echo "go test: $$(( $$(date +%s) - begin )) s"; exit $$status

# BUILD_FLAGS stamp the binary with what `sluice version`, /healthz and
# sluice_build_info report. -buildvcs=true records the commit (and whether
# the tree was modified) when building from a git checkout; it is set here
# because a GOFLAGS=-buildvcs=false in the environment would otherwise drop
# it, and left out outside a checkout, where it would fail the build.
# VERSION=v1.4.0 sets the version; unset, it is the module version Go
# derives from the commit.
VERSION ?=
BUILD_FLAGS := $(if $(shell git rev-parse --git-dir 2>/dev/null),-buildvcs=true) \
	$(if $(VERSION),-ldflags "-X sluice/internal/buildinfo.version=$(VERSION)")
build:
	$(GO) build $(BUILD_FLAGS) -o bin/sluice ./cmd/sluice

## static: a statically linked sluice (no cgo) a host can take as it is, for its agent
# make build's binary links the C library; an agent's host may have another.
static:
	CGO_ENABLED=0 $(GO) build -trimpath $(BUILD_FLAGS) -o bin/sluice-static ./cmd/sluice

## demo-artifacts: two versions of cmd/hello, the service the `make run` demo deploys
demo-artifacts:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=v1" -o bin/hello-v1 ./cmd/hello
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=v2" -o bin/hello-v2 ./cmd/hello

# vet builds what it checks with -race, as go test does: the two then share
# every compile in the Go cache, so that a fresh machine compiles the tree
# and its tests once for both instead of once each (measured on two
# packages: the test compile after it fell from 138 s of CPU to 20 s).
vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt -w these files: $$unformatted" >&2; exit 1; fi
	$(GO) vet -race ./...

## tools: the code generators, built once into ./bin under the versions go.mod pins
# Each binary's name carries its version, so a version bump in go.mod builds
# the new one (and removes the old). sqlc is built without cgo: its
# PostgreSQL parser is then libpg_query compiled to WebAssembly and run by
# wazero (github.com/wasilibs/go-pgquery), instead of libpg_query's C
# compiled by gcc, which took most of a fresh machine's first build.
SQLC_VERSION := $(shell awk '$$1 == "github.com/sqlc-dev/sqlc" { print $$2 }' go.mod)
OAPI_CODEGEN_VERSION := $(shell awk '$$1 == "github.com/oapi-codegen/oapi-codegen/v2" { print $$2 }' go.mod)
export SQLC := bin/sqlc-$(SQLC_VERSION)
export OAPI_CODEGEN := bin/oapi-codegen-$(OAPI_CODEGEN_VERSION)
tools: $(SQLC) $(OAPI_CODEGEN)
$(SQLC):
	@mkdir -p bin; rm -f bin/sqlc-*
	CGO_ENABLED=0 $(GO) build -o $@ github.com/sqlc-dev/sqlc/cmd/sqlc
$(OAPI_CODEGEN):
	@mkdir -p bin; rm -f bin/oapi-codegen-*
	$(GO) build -o $@ github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen

## generate: sqlc code, the OpenAPI spec, and the Go client built from it
# Each generator's sum (scripts/gen-sum.sh) is kept beside its output, so
# that check-generated runs a generator only when something it reads or
# writes changed.
generate: tools
	$(SQLC) generate
	scripts/gen-sum.sh sqlc > db/sqlc.sum
	$(GO) run ./cmd/openapi-spec > httpapi/openapi.json
	$(GO) run ./cmd/openapi-spec -3.0 > internal/apiclient/openapi-3.0.json
	$(OAPI_CODEGEN) -config internal/apiclient/oapi-codegen.yaml internal/apiclient/openapi-3.0.json
	scripts/gen-sum.sh oapi-codegen > internal/apiclient/client.sum
	@if command -v npm >/dev/null; then cd internal/apiclient/ts && npm ci --no-audit --no-fund --loglevel=error >/dev/null && npx --no-install openapi-typescript ../../../httpapi/openapi.json -o schema.d.ts; \
	  else echo "npm is missing: internal/apiclient/ts/schema.d.ts not regenerated"; fi

## console: rebuild the web console's embedded files (internal/console/dist) from its sources (needs npm)
# tsc checks the sources against the generated API types first, so run it
# after make generate when the API changed.
console:
	cd internal/console && npm ci --no-audit --no-fund --loglevel=error >/dev/null && npx --no-install tsc --noEmit -p . && node build.mjs dist

## check-generated: fail when committed generated code differs from what generate makes
# It builds a generator (make tools) only when that generator must run.
check-generated:
	@MAKE="$(MAKE) --no-print-directory" bash scripts/check-generated.sh

## check-contract: validate both spec documents, and type-check the TypeScript types and example (needs npm)
check-contract:
	@bash scripts/check-contract.sh

## ensure-tools: install PostgreSQL and git from Debian when missing (as root), or say how
ensure-tools:
	@bash scripts/ensure-tools.sh

## ensure-browser: install what only tests use, when they will run (as root), or say how:
## Chromium for the console's browser test, systemd-container for the systemd runtime's
# Only make test asks for them: make run drives no browser and boots no container.
ensure-browser:
	@SLUICE_ENSURE_BROWSER=1 bash scripts/ensure-tools.sh

## bench: the figures each feature promises, beside their floors
# One op of BenchmarkActionStart is one action (30 give its p50 and p99), and
# one of BenchmarkAccept one request; each runs alone, so that no other
# package's benchmark shares the CPUs with it. One op of BenchmarkDriftCheck
# is one drift check (10 give its p50 and max), and one of BenchmarkSweep100 a
# sweep over 100 applied units (one; its untimed setup applies all 100).
# BenchmarkStorm is 1,000 identical clicks at once over HTTP (converge, drift
# check, sync), each beside 1,000 converges of 1,000 services and the
# machine's HTTP floor (1,000 GET /healthz): runs made, p50, p99, peak RSS.
# BenchmarkAgents is 500 simulated agents heartbeating and long-polling one
# serve: heartbeat and dispatch (task committed → its agent has it) p50 and
# p99, serve's CPU and peak RSS, its database connections idle and under the
# load, and one real agent's idle RSS. BenchmarkConvergeOnNode is POST
# converge → process started on an agent's node beside serve's own (goal
# ≤ 1.2×). BenchmarkWebhook is 100 pushes, each a signed GitHub delivery
# POSTed → its sync running (the started event over SSE), p50 and p99 beside
# the HTTP floor (GET /healthz round trips). BenchmarkActionCost is what one
# converge and one no-change sync cost PostgreSQL (WAL, rows, journal
# growth), 100 of each, and a sync creating 1,000 units (docs/scaling.md).
# BenchmarkAPIReads is GET gitops status, and pages of units, services and
# applications (the portfolio) with 10,000 units (1,000 of them services)
# under wrk, beside GET /healthz under the same load (p50, p99, requests a
# second), each page of services or applications also beside the page of
# units of its size; and serve's RSS idle and empty, idle with the
# inventory, and at its peak after the reads.
# BenchmarkConvergeBesideBusy is POST converge → running (p50, p99 of 5)
# while 0, 10 and 100 other services each have a converge in flight that
# holds a worker of the services queue for 3 s, beside the same with none busy.
# BenchmarkMetricsScrape is GET /metrics over a journal of 1,000,000 runs
# made in SQL (p50 and max of 20, goal under 50 ms), beside the aggregate of
# the whole journal that a scrape ran before the run tally.
# BenchmarkRetention is a retention pass over 1,000,000 runs and 2,000,000
# events made in SQL (its untimed setup takes about 3 minutes), checked at
# that size as TestPass checks 20,000 runs.
# BenchmarkConvergeContainer is POST converge → a new container running and
# healthy on an agent's real Podman, beside `docker run` of the same image by
# hand (goal: within 1.5×).
# BenchmarkBigBlobRSS is serve's peak resident memory while it clones, and
# while it fetches, an intent repository holding a 100 MiB file, beside its
# idle resident memory (goal: within 2×).
#
# BenchmarkSync10k (internal/gitops) is a sync of 10,000 units, request to
# receipt, beside the git CLI doing the same work in the same loop (first
# sync, no change, one file, 100 files); it runs SYNC_BENCH_COUNT times and
# the table after it gives the medians and the goals (docs/benchmarks.md),
# then the medians of each stage of the sync (fetch, diff, walk, admit,
# write, finish).
# The gitsync one is Mirror.Sync alone beside git clone / git fetch + diff.
SYNC_BENCH_COUNT ?= 3
# SYNC_TABLE_AWK turns BenchmarkSync10k's lines into the table of medians.
define SYNC_TABLE_AWK
function med(a, n,   i, j, t) {
  for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
  return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
/^BenchmarkSync10k\// {
  name = $$1; sub(/^BenchmarkSync10k\//, "", name); sub(/-[0-9]+$$/, "", name)
  if (!(name in runs)) order[++k] = name
  r = ++runs[name]
  for (i = 3; i < NF; i++) {
    if ($$(i+1) == "ms/sync") s[name, r] = $$i
    else if ($$(i+1) == "ms/floor") f[name, r] = $$i
    else if ($$(i+1) == "x-floor") x[name, r] = $$i
    else if ($$(i+1) ~ /^ms\//) { st[name, substr($$(i+1), 4), r] = $$i; staged = 1 }
  }
}
END {
  goal["FirstSync"] = 1.5; goal["NoChange"] = 1.5; goal["OneFileChanged"] = 2; goal["HundredFilesChanged"] = 2
  printf "\nSync of 10,000 units, request to receipt: medians of %d runs\n", runs[order[1]]
  printf "%-20s %12s %12s %8s %6s  %s\n", "scenario", "sluice ms", "git floor ms", "ratio", "goal", "met"
  for (j = 1; j <= k; j++) {
    n = order[j]
    for (r = 1; r <= runs[n]; r++) { a[r] = s[n, r] + 0; b[r] = f[n, r] + 0; c[r] = x[n, r] + 0 }
    ms = med(a, runs[n]); mf = med(b, runs[n]); mx = med(c, runs[n])
    printf "%-20s %12.1f %12.1f %7.2fx %5.1fx  %s\n", n, ms, mf, mx, goal[n], (mx <= goal[n] ? "yes" : "no")
  }
  if (!staged) exit
  # go test prints the metrics by name; the stages run in this order.
  ns = split("fetch diff walk admit write finish", stages, " ")
  printf "\nThe sync's stages, as its receipts time them: medians, ms\n%-20s", "scenario"
  for (t = 1; t <= ns; t++) printf " %8s", stages[t]
  printf "\n"
  for (j = 1; j <= k; j++) {
    n = order[j]
    printf "%-20s", n
    for (t = 1; t <= ns; t++) {
      for (r = 1; r <= runs[n]; r++) a[r] = st[n, stages[t], r] + 0
      printf " %8.1f", med(a, runs[n])
    }
    printf "\n"
  }
}
endef
export SYNC_TABLE_AWK
bench: ensure-tools build bench-sync
	@SLUICE_ENSURE_WRK=1 bash scripts/ensure-tools.sh
	$(GO) test -run '^$$' -bench '^BenchmarkSync10k$$' -benchtime 5x ./internal/gitsync/
	$(GO) test -p 1 -run '^$$' -bench . -skip '^Benchmark(ActionStart|ActionCost|Storm|Agents|ConvergeOnNode|Webhook|APIReads|ConvergeBesideBusy|ConvergeSystemd|ConvergeContainer|Sync10k|BigBlobRSS)$$' -benchtime 3x ./cmd/sluice/ ./internal/gitops/
	$(GO) test -run '^$$' -bench '^BenchmarkActionStart$$' -benchtime 30x ./cmd/sluice/
	$(GO) test -run '^$$' -bench '^BenchmarkStorm$$' -benchtime 1x ./cmd/sluice/
	$(GO) test -run '^$$' -bench '^BenchmarkAgents$$' -benchtime 1x ./cmd/sluice/
	$(GO) test -run '^$$' -bench '^BenchmarkConvergeOnNode$$' -benchtime 20x ./cmd/sluice/
	$(GO) test -run '^$$' -bench '^BenchmarkConvergeSystemd$$' -benchtime 10x ./cmd/sluice/
	$(GO) test -run '^$$' -bench '^BenchmarkConvergeContainer$$' -benchtime 10x ./cmd/sluice/
	$(GO) test -run '^$$' -bench '^BenchmarkWebhook$$' -benchtime 1x ./cmd/sluice/
	$(GO) test -run '^$$' -bench '^BenchmarkAPIReads$$' -benchtime 1x ./cmd/sluice/
	$(GO) test -run '^$$' -bench '^BenchmarkConvergeBesideBusy$$' -benchtime 1x ./cmd/sluice/
	$(GO) test -run '^$$' -bench '^BenchmarkActionCost$$' -benchtime 100x ./cmd/sluice/
	$(GO) test -run '^$$' -bench . -benchtime 2000x ./internal/services/
	$(GO) test -run '^$$' -bench '^BenchmarkDriftCheck$$' -benchtime 10x ./internal/infra/
	$(GO) test -run '^$$' -bench '^BenchmarkSweep100$$' -benchtime 1x ./internal/infra/
	$(GO) test -run '^$$' -bench '^BenchmarkMetricsScrape$$' -benchtime 20x ./internal/metrics/
	$(GO) test -run '^$$' -bench '^BenchmarkRetention$$' -benchtime 1x -timeout 30m ./internal/retention/
	$(GO) test -run '^$$' -bench '^BenchmarkBigBlobRSS$$' -benchtime 1x ./cmd/sluice/

## bench-sync: the sync table alone (make bench prints it first), also written into docs/benchmarks.md
bench-sync: ensure-tools
	@mkdir -p bin
	$(GO) test -run '^$$' -bench '^BenchmarkSync10k$$' -benchtime 5x -count $(SYNC_BENCH_COUNT) -timeout 60m ./internal/gitops/ | tee bin/bench-sync.txt
	@awk "$$SYNC_TABLE_AWK" bin/bench-sync.txt | tee bin/bench-sync-table.txt
	@scripts/bench-doc.sh bin/bench-sync.txt bin/bench-sync-table.txt

## faults: fault injection on real processes (kill -9 of serve, PostgreSQL restarts, Git
## failures, a secret scan, the status routes sampled under faults), FAULT_TRIALS trials
## each, then one summary line per scenario
# `make test` runs the same tests with 3 trials. The whole log is kept in
# bin/faults.log; the summary is printed whether the tests pass or fail, and
# the target fails when they do. SLUICE_FAULT_SEED, when set, replays the
# kill moments a failing run logged.
FAULT_TRIALS ?= 20
faults: ensure-tools
	@mkdir -p bin; set +e; \
	  SLUICE_FAULT_TRIALS=$(FAULT_TRIALS) $(GO) test -race -count=1 -v -run '^TestFaults' -timeout 60m ./cmd/sluice/ 2>&1 \
	    | tee bin/faults.log | grep --line-buffered -E '\] (inject|check) |FAULTS '; \
	  rc=$${PIPESTATUS[0]}; \
	  echo; echo "== fault injection summary: $(FAULT_TRIALS) trials a scenario; the whole log is bin/faults.log =="; \
	  grep -E 'FAULTS ' bin/faults.log | sed -E 's/^ *faults[a-z_]*_test\.go:[0-9]+: //'; \
	  grep -E '^ *--- (PASS|FAIL)|^(ok|FAIL)[[:space:]]' bin/faults.log; \
	  exit $$rc

## fuzz: run every fuzz target for $(FUZZTIME), one after the other (`make test` runs their seeds)
# One at a time, because a fuzz target takes every CPU; -fuzz takes one
# target, so each gets its line.
FUZZTIME ?= 20s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzCanonical$$' -fuzztime $(FUZZTIME) ./internal/unit/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./internal/unit/
	$(GO) test -run '^$$' -fuzz '^FuzzSetString$$' -fuzztime $(FUZZTIME) ./internal/unit/
	$(GO) test -run '^$$' -fuzz '^FuzzRenderLines$$' -fuzztime $(FUZZTIME) ./internal/render/
	$(GO) test -run '^$$' -fuzz '^FuzzRenderSpec$$' -fuzztime $(FUZZTIME) ./internal/render/
	$(GO) test -run '^$$' -fuzz '^FuzzRoundTrip$$' -fuzztime $(FUZZTIME) ./internal/render/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./internal/render/
	$(GO) test -run '^$$' -fuzz '^FuzzSettingsInput$$' -fuzztime $(FUZZTIME) ./internal/source/

clean:
	rm -rf bin
