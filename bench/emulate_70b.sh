#!/usr/bin/env bash
# Cluster-scale emulation: Llama 3.3 70B, TP 8, 16 data-parallel pipelines, PP 8 and 16, 1F1B,
# interleaved and ZB-H1, planned from per-layer partition costs on the simulated A100 (a model, not
# a measurement) by `kareus compare` with stragglers 1.05-1.5. About 3.5 minutes on 2 cores.
#
# Usage: bench/emulate_70b.sh [BUILD_DIR]
# Writes BUILD_DIR/emulate_70b/<config>/ (compare.csv, compare.json, stragglers.csv) and
# bench/results/emulate_70b.md; prints the tables.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
cmake --build "$build" -j"$(nproc)" --target kareus >/dev/null
out=$build/emulate_70b
mkdir -p "$out"
job="--model llama-3.3-70b --tp 8 --mbs 4 --seq 4096 --microbatches 64 --dp 16 --straggler 1.05,1.1,1.2,1.3,1.5"
l8=$(printf '10,%.0s' {1..8}); l8=${l8%,}
l16=$(printf '5,%.0s' {1..16}); l16=${l16%,}
run() {
  local name=$1; shift
  "$build/kareus" compare $job "$@" --out "$out/$name" >/dev/null
}
run pp8-1f1b --pp 8 --layers-per-stage "$l8"
run pp8-interleaved2 --pp 8 --layers-per-stage "$l8" --schedule interleaved --virtual-stages 2
run pp8-zb-h1 --pp 8 --layers-per-stage "$l8" --schedule zb-h1
run pp16-1f1b --pp 16 --layers-per-stage "$l16"
run pp16-interleaved5 --pp 16 --layers-per-stage "$l16" --schedule interleaved --virtual-stages 5
run pp16-zb-h1 --pp 16 --layers-per-stage "$l16" --schedule zb-h1
python3 "$root/bench/emulate_70b_table.py" "$out" pp8-1f1b pp8-interleaved2 pp8-zb-h1 pp16-1f1b pp16-interleaved5 pp16-zb-h1 \
  | tee "$root/bench/results/emulate_70b.md"
