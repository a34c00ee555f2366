# OCX in Go. `make demo` runs a demo node on 127.0.0.1; `make test` passes the tests.
# Both install what they need (fossil, bubblewrap, git, s6, chromium, and
# iproute2 and util-linux for the tests' hosts of their own) from Debian
# when missing.

GO        ?= go
BIN       ?= bin
FUZZTIME  ?= 10s
TESTFLAGS ?=
APT_PKGS  := fossil bubblewrap git s6 chromium iproute2 util-linux e2fsprogs

# The agent CLIs the llm runners drive, from the npm registry: their
# versions are pinned here, and only here. make deps installs them once
# into a directory of their own, outside the tree; make test gives the
# tests its bin/ as OCX_AGENT_CLIS.
CLAUDE_CODE_VERSION := 2.1.328
CODEX_VERSION       := 0.169.0
AGENT_CLIS_ROOT     ?= $(HOME)/.cache/ocx/agent-clis
AGENT_CLIS          := $(AGENT_CLIS_ROOT)/claude-code-$(CLAUDE_CODE_VERSION)-codex-$(CODEX_VERSION)
export OCX_AGENT_CLIS := $(AGENT_CLIS)/node_modules/.bin
export OCX_CLAUDE_CODE_VERSION := $(CLAUDE_CODE_VERSION)
export OCX_CODEX_VERSION := $(CODEX_VERSION)

.PHONY: all deps build test bench fuzz lint demo clean cover

all: build

# deps installs the programs the tests and the demo run for real; chromium
# is the headless browser the console's browser tests drive.
deps:
	@missing=""; \
	command -v fossil >/dev/null 2>&1 || missing="$$missing fossil"; \
	command -v bwrap  >/dev/null 2>&1 || missing="$$missing bubblewrap"; \
	command -v git    >/dev/null 2>&1 || missing="$$missing git"; \
	command -v s6-svscan >/dev/null 2>&1 || missing="$$missing s6"; \
	command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	command -v nsenter >/dev/null 2>&1 || missing="$$missing util-linux"; \
	PATH="$$PATH:/usr/sbin:/sbin" command -v mkfs.ext4 >/dev/null 2>&1 || missing="$$missing e2fsprogs"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v node >/dev/null 2>&1 || missing="$$missing nodejs"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
	@fossil version >/dev/null && bwrap --version >/dev/null && command -v chromium >/dev/null
	@# The CLIs, installed whole into a directory beside, then renamed into
	@# place: a half-made install is never taken for one.
	@if ! "$(OCX_AGENT_CLIS)/claude" --version 2>/dev/null | grep -q '^$(CLAUDE_CODE_VERSION) ' || \
	    ! "$(OCX_AGENT_CLIS)/codex" --version 2>/dev/null | grep -q ' $(CODEX_VERSION)$$'; then \
	  echo "installing @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) and @openai/codex@$(CODEX_VERSION) into $(AGENT_CLIS)"; \
	  rm -rf "$(AGENT_CLIS).tmp" && mkdir -p "$(AGENT_CLIS).tmp" && \
	  npm install --prefix "$(AGENT_CLIS).tmp" --no-audit --no-fund --loglevel=error \
	    @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) @openai/codex@$(CODEX_VERSION) && \
	  rm -rf "$(AGENT_CLIS)" && mv "$(AGENT_CLIS).tmp" "$(AGENT_CLIS)"; \
	fi
	@"$(OCX_AGENT_CLIS)/claude" --version >/dev/null && "$(OCX_AGENT_CLIS)/codex" --version >/dev/null

# The build is stamped (host/version) with the git commit it is
# built from and a version made of that commit's time and hash, as Go's
# pseudo-versions are (+dirty when the tree has changes); outside a git
# checkout both stay "dev". `ocx release stage` stamps a Fossil check-in
# the same way.
CHECKIN := $(shell git rev-parse HEAD 2>/dev/null || echo dev)
VERSION := $(shell if [ "$(CHECKIN)" = dev ]; then echo dev; else \
	t=$$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S); \
	d=$$(git status --porcelain --untracked-files=no 2>/dev/null | head -c1); \
	echo "v0.0.0-$$t-$$(echo $(CHECKIN) | cut -c1-12)$${d:++dirty}"; fi)
LDFLAGS := -X github.com/ocx-go/ocx/host/version.Version=$(VERSION) -X github.com/ocx-go/ocx/host/version.Checkin=$(CHECKIN)

build:
	# Static binaries: no dynamic loader at each start (the hook runs once per
	# sync), and a sandbox needs no /lib to run them.
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

# test runs the integration tests (itest/: real servers, daemons, sessions
# and sandboxes, with timing windows of their own) after the other packages,
# not beside them: on 2 cores the two halves starved each other for seconds.
test: deps
	$(GO) vet ./...
	$(GO) test -race -shuffle=on -timeout 60m $(TESTFLAGS) $$($(GO) list ./... | grep -v '/itest$$')
	# Each benchmark of those packages once, so that none rots unseen (a
	# benchmark checks what it measures: one that stopped working fails).
	@echo "go test -run '^$$' -bench . -benchtime 1x (every benchmark but itest's, once)"
	@out=$$($(GO) test -run '^$$' -bench . -benchtime 1x -timeout 10m $$($(GO) list ./... | grep -v '/itest$$') 2>&1) || { echo "$$out"; exit 1; }
	$(GO) test -race -shuffle=on -timeout 60m $(TESTFLAGS) ./itest/

# cover measures the tests' coverage (seed 002, "measure coverage"): a
# report per package and in all, written outside the tree (COVERDIR), its
# summary printed. The integration tests run the real binaries, built
# without coverage, so their packages count what the unit tests reach.
COVERDIR ?= $(or $(TMPDIR),/tmp)/ocx-cover
cover: deps
	@mkdir -p $(COVERDIR)
	@$(GO) test -covermode=atomic -coverpkg=./... -coverprofile=$(COVERDIR)/cover.out -timeout 60m $$($(GO) list ./... | grep -v '/itest$$') > $(COVERDIR)/packages.txt; \
	  status=$$?; cat $(COVERDIR)/packages.txt; exit $$status
	@$(GO) tool cover -func=$(COVERDIR)/cover.out > $(COVERDIR)/functions.txt
	@$(GO) tool cover -html=$(COVERDIR)/cover.out -o $(COVERDIR)/cover.html
	@echo "coverage report in $(COVERDIR): packages.txt, functions.txt, cover.html"
	@grep '^total:' $(COVERDIR)/functions.txt

# bench runs the speed benchmarks one at a time, so that none loads the
# machine another measures: first each package's own (one package at a
# time), then the integration benchmarks docs/daemon.md and issue 42 name,
# each in a go test of its own with its benchtime (NAME:BENCHTIME; those
# that take their samples themselves run once). BENCHCOUNT repeats each.
BENCHCOUNT ?= 1
ITEST_BENCH := \
	BenchmarkRunCPU:3x \
	BenchmarkRemoteRunsPerSecond/server-node:8x \
	BenchmarkHook:1s \
	BenchmarkWebPost:50x \
	BenchmarkAgentTurn/versus:10x \
	BenchmarkDaemonLaunch:1x \
	BenchmarkConsolePage:1x \
	BenchmarkConsoleState:1x \
	BenchmarkAskTaken:1000x \
	BenchmarkDaemonIngest:1x \
	BenchmarkDaemonMemory:1x \
	BenchmarkDaemonIndexMemory:1x
bench: deps
	$(GO) test -p 1 -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) -timeout 60m $$($(GO) list ./... | grep -v '/itest$$')
	@set -e; for b in $(ITEST_BENCH); do \
	  name=$${b%:*}; t=$${b##*:}; \
	  echo "go test -run '^$$' -bench '^$$name\$$' -benchtime $$t ./itest/"; \
	  $(GO) test -count=$(BENCHCOUNT) -run '^$$' -bench "^$$(echo $$name | sed 's,/,$$/^,')\$$" -benchtime $$t -timeout 60m ./itest/; \
	done

# fuzz runs every fuzz target for FUZZTIME each.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

demo: deps build
	$(BIN)/ocx demo

clean:
	rm -rf $(BIN)
