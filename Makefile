# ralph — developer targets. `make test` is what CI runs (via .ci/run).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

GO       ?= go
BIN      := bin/ralph
FUZZTIME ?= 60s

.PHONY: build install run ui demo-agent test test-race-e2e test-agents bench fuzz lint

## build: compile ralph into bin/ralph
build:
	$(GO) build -o $(BIN) .

## install: put ralph on PATH: copy bin/ralph to PREFIX/bin (default ~/.local/bin), and say how to add
## that directory to PATH when it is not on it
PREFIX ?= $(HOME)/.local
install: build
	install -d "$(PREFIX)/bin"
	install -m 0755 $(BIN) "$(PREFIX)/bin/ralph"
	@echo "installed $(PREFIX)/bin/ralph"
	@case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; \
	*) echo "$(PREFIX)/bin is not on your PATH; add it: echo 'export PATH=\"$(PREFIX)/bin:\$$PATH\"' >> ~/.bashrc (or your shell's profile), then open a new shell";; esac

## run: run the quickstart loop headless (static plan, no API key; it ends by itself) and verify its
## causal chain
run: build
	$(BIN) run examples/quickstart/ralph.toml --no-tui
	$(BIN) chain verify --store examples/quickstart/.ralph

## ui: the same quickstart in the live terminal UI (q quits once it is done)
ui: build
	$(BIN) run examples/quickstart/ralph.toml

## demo-agent: the README's agent loop with the repository's stand-in claude (no agent, key or network):
## a Go module whose Add subtracts, `ralph init --agent claude`, then `ralph run --no-tui` until go test passes
demo-agent: build
	examples/agent-demo/run.sh "$(CURDIR)/$(BIN)"

## test: vet, then every test with the race detector (including the end-to-end tests).
## Every package's tests are compiled first with both cores (running no test). Then two streams of test
## binaries run side by side, each one package at a time, so that no more than two test programs share the
## two cores (the fleet's tests run real NATS servers and workers, and the end-to-end package, cli, spends its
## time in the binaries it starts): E2E_STREAM (the end-to-end package and the ledger's damage tests, about
## 430 s) beside every other package (about 400 s).
E2E_STREAM := ./cli/ ./ledger/
test:
	$(GO) vet ./...
	$(GO) test -race -count 1 -run '^$$' -exec true ./... >/dev/null
	@$(GO) test -race -p 1 $(E2E_STREAM) & e2e=$$!; \
	rc=0; $(GO) test -race -p 1 $$($(GO) list ./... | grep -v -e '/cli$$' -e '/ledger$$') || rc=$$?; \
	wait $$e2e || rc=$$?; exit $$rc

## test-race-e2e: end-to-end rows again, with the binary they drive built with -race, so the race detector
## sees the shipped binary as well as the tests: the rows whose binary runs the most at once (the loop with
## its socket, attach and readers, signals, resume, batches in parallel, the fleet's workers, MCP control,
## the agent's stream and its limits, the sandboxed exec, ralph web's live stream, a backlog on the fleet). The whole suite this way takes about 12 minutes on
## two cores; these rows take under 3. RACE_E2E=all runs every row.
RACE_E2E ?= Quickstart|RunTUIInTerminal|DetachAndAttach|ReadingCommandsOnALiveRun|SocketUnderManyStreams|SignalsCloseTheStore|NeverHangsOnASignal|ResumeAfterKill|BatchRunsABacklog|BatchResumesAfterAKill|BatchViewInTerminal|WorkersRunSubmittedJobs|FleetAttachLive|MCPControl|AttachAnswersApprovals|AgentUsageLimitWaitsAndRetries|StoreLostEndsTheRun|AgentFloodIsRecordedWhole|SandboxExec|IdleTimeoutEndsTheAgentsToolAndRecordsItCancelled|WebFollowsALiveRun|SubmitTasksRunsABacklogOnTheFleet
test-race-e2e:
	RALPH_E2E_RACE=1 $(GO) test -count 1 -timeout 15m -run 'E2E/^($(if $(filter all,$(RACE_E2E)),.*,$(RACE_E2E)))$$' ./cli/

## test-agents: install the pinned real agent CLIs (agents/package.json) into a cache directory and run
## ralph's conformance tests with them against the mock model server (agent/conformance), each pinned
## version. Three tests at a time: most of their time is spent waiting (a limit's reset, an idle timeout).
## When the npm registry cannot be reached it says so loudly and skips (exit 0); any other failure fails.
test-agents:
	@set +e; dir="$$(bash agents/install.sh)"; rc=$$?; set -e; \
	if [ $$rc -eq 3 ]; then \
		echo "************************************************************************"; \
		echo "make test-agents: SKIPPED: the npm registry cannot be reached, so the"; \
		echo "real agent CLIs are not installed and ralph is not checked against them"; \
		echo "************************************************************************"; \
		exit 0; \
	fi; \
	if [ $$rc -ne 0 ]; then echo "make test-agents: agents/install.sh failed (exit $$rc)"; exit $$rc; fi; \
	echo "make test-agents: the agent CLIs are in $$dir/bin"; \
	RALPH_AGENTS_BIN="$$dir/bin" $(GO) test -race -count 1 -timeout 9m -parallel 3 -v ./agent/conformance/ 2>&1 | \
		grep -v '^=== \(RUN\|PAUSE\|CONT\)' 

## bench: run the benchmarks six times each into bench.out (compare runs with benchstat)
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./... | tee bench.out
	if [ -d bench ]; then \
		cd bench && $(GO) test -run '^$$' -bench . -benchmem -count 6 ./... | tee -a ../bench.out; \
	fi

## fuzz: run every fuzz target for FUZZTIME each (default 60s): the RTFS reader, the JSON IR and
## the model-output extractor, builtins on shared values, predicate JSON, the config, the ledger's decoders (a damaged
## log's entries, the witness), the agent stream parsers and OpenCode's JSONC config, the fleet's jobs, controls and
## tunnel frames, submit --workspace, the task sources, git's merge-tree and status output, the socket's requests,
## the SSE reader, the batch view and the web's what-if form
FUZZ_TARGETS := rtfs:FuzzRead rtfs:FuzzBuiltinsOnSharedValues arbiter:FuzzIR arbiter:FuzzExtract stop:FuzzPredicateJSON config:FuzzParse config:FuzzSplitCommand \
	ledger:FuzzDecodeCanonical ledger:FuzzParseJSONAction agent:FuzzParseClaude agent:FuzzParseCodex \
	agent:FuzzParseGemini agent:FuzzParseOpencode agent:FuzzParseCodexReal agent:FuzzGeminiStderr agent:FuzzJSONScan ledger:FuzzReadBundle fleet:FuzzSegmenter fleet:FuzzSplitWorkspace config:FuzzCredentialIn \
	agent:FuzzStripJSONC fleet:FuzzParseCtl fleet:FuzzParseFrame fleet:FuzzParseJob fleet:FuzzParseJobTask fleet:FuzzTunnelFrames fleet:FuzzTunnelSubjects internal/e2e:FuzzReadSSE ledger:FuzzDecodeLogEntry ledger:FuzzDecodeWitnessFailure ledger:FuzzWitnessFile serve:FuzzRequests tasks:FuzzParseChecklist tasks:FuzzParseMergeTree tasks:FuzzParsePRD tasks:FuzzParseStatus tasks:FuzzParseWorktrees tui:FuzzBatchView web:FuzzStopSection
fuzz:
	for t in $(FUZZ_TARGETS); do \
		echo "== $$t"; $(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) ./$${t%%:*} || exit 1; \
	done

## lint: gofmt must have nothing to say, and go vet must pass
lint:
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then \
		echo "gofmt -l: these files need gofmt -w:"; echo "$$unformatted"; exit 1; \
	fi
	$(GO) vet ./...
