# Convenience wrapper around CMake. `make run` and `make test` do all set-up on a fresh Debian
# machine (packages via scripts/install-deps.sh); the tool lands at build/kareus.
JOBS ?= $(shell nproc)
BUILD ?= build

.PHONY: deps configure build run test bench clean

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake --preset default >/dev/null

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

# The main job on the built-in default: the frontier of the bundled, measured GPT-3 A100 profile.
run: build
	$(BUILD)/kareus frontier --profile data/perseus-sosp24/stage_profile/gpt3-175b+a100_sxm_bf16.csv \
	  --stages 8 --microbatches 12 --p-blocking 83.64 --out kareus-out

test: build
	@ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

bench: build
	@$(BUILD)/bench/kareus_bench

clean:
	@rm -rf $(BUILD)
