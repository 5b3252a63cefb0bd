# Convenience wrapper around CMake. `make run` and `make test` do all set-up on a fresh Debian
# machine (packages via scripts/install-deps.sh); the tool lands at build/kareus.
JOBS ?= $(shell nproc)
BUILD ?= build

.PHONY: deps configure build tool run test sanitize fuzz bench clean

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake --preset default >/dev/null

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

# The command-line tool alone, without the test and bench binaries.
tool: configure
	@cmake --build $(BUILD) -j$(JOBS) --target kareus

# The main job on the built-in default: `kareus plan` for Llama 3.2 3B, TP 8, PP 2, 8 microbatches of
# 8 at sequence 4096, on the simulated A100 SXM4 40GB; writes kareus-out/.
run: tool
	$(BUILD)/kareus plan --out kareus-out

test: build
	@ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# ASan + UBSan over the core, solver, runtime and CLI tests and the fuzz inputs; TSan over the
# solver's and the runtime's threads (docs/testing.md).
sanitize: deps
	@JOBS=$(JOBS) bash scripts/sanitize.sh

# Every fuzz target for FUZZ_SECONDS each (libFuzzer; skipped, exit 0, without clang).
FUZZ_SECONDS ?= 300
fuzz: deps
	@FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) bash scripts/fuzz.sh

# Solver speed, simulated-evaluator throughput and (slow, minutes) the search's sample efficiency.
bench: build
	@$(BUILD)/bench/kareus_bench
	@$(BUILD)/bench/kareus_evaluate_bench
	@$(BUILD)/bench/kareus_planner_bench
	@bash bench/search_efficiency.sh $(BUILD)

clean:
	@rm -rf $(BUILD)
