#!/usr/bin/env bash
# Regenerates the sample-efficiency table of `kareus search` (the issue's figure): for every
# partition of the ten Kareus evaluation configs on the simulated A100 (a model, not a
# measurement), HV(found)/HV(exhaustive) in (real energy, time) for MOBO (worst of seeds 1-3) and
# random sampling at 10/15/20% of the grid and at the Kareus artifact's budget (96 + 4×32).
# About 20 minutes on 2 cores, 25 with --noise; `--seeds 1` takes about a third.
#
# Usage: bench/search_efficiency.sh [BUILD_DIR] [kareus_search_efficiency flags, e.g. --configs 0,1]
# (--noise 0.01: the searches see 1% seeded noise, each seed its own draw, and are told of it;
# hypervolumes stay on the noise-free truth.)
# Writes bench/results/search_efficiency.md and .json (with --noise S, search_efficiency_noise_<S
# in %>pct.md and .json); prints the table.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
name=search_efficiency
args=("$@")
for ((i = 0; i + 1 < ${#args[@]}; ++i)); do
  if [[ ${args[i]} == --noise ]]; then name+="_noise_$(awk -v s="${args[i + 1]}" 'BEGIN { printf "%g", 100 * s }')pct"; fi
done
cmake -S "$root" -B "$build" >/dev/null
cmake --build "$build" -j"$(nproc)" --target kareus_search_efficiency >/dev/null
mkdir -p "$root/bench/results"
"$build/bench/kareus_search_efficiency" --markdown "$root/bench/results/$name.md" \
  --json "$root/bench/results/$name.json" "$@"
