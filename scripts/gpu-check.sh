#!/usr/bin/env bash
# Checks Kareus's GPU control on this machine's NVIDIA GPU, in well under 5 minutes: lists the
# clocks, measures how long locking the SM clock takes, runs the same busy CUDA kernel at the
# highest and a low clock (time, energy, power of each) through the frequency controller and the
# energy monitor, times a GPU-timed clock change (a marker on the stream) and the host time per
# instruction it saves against a loop that synchronises at every instruction, and shows the clocks
# were reset after.
#
# Where there is no NVIDIA GPU it still builds the check and says so, exiting 0. Without the CUDA
# toolkit the busy-kernel part is skipped. Clock setting needs root or CAP_SYS_ADMIN.
#
#   scripts/gpu-check.sh [--gpu N] [--seconds S]     (BUILD=dir picks the build directory)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
# The CUDA variant exists only where CMake found the toolkit.
target=kareus_gpu_check
targets=$(cmake --build "$build" --target help 2>/dev/null || true)
if grep -q 'kareus_gpu_check_cuda' <<<"$targets"; then
  target=kareus_gpu_check_cuda
fi
echo "gpu-check: building $target in $build/ ..." >&2
cmake --build "$build" -j"$(nproc)" --target "$target" >/dev/null

# Bounded: if the check hangs, SIGTERM makes the controller reset the clocks before it exits.
exec timeout --signal=TERM --kill-after=20 240 "$build/$target" "$@"
