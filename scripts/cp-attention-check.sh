#!/usr/bin/env bash
# Where the host waits in context-parallel attention: runs it on two GPUs (TransformerEngine's
# all-gather CP attention where installed), forward and backward, under torch.profiler with the CUDA
# runtime recorded (scripts/cp_attention_probe.py), then `kareus hw fit --engine-trace` on the trace,
# which names the CPU op behind every call that blocks the host on the GPU. The measurement the
# model's missing 0.5-1 ms per context-parallel layer pass on the Kareus cluster asks for
# (docs/model.md). Bounded: LIMIT seconds (default 300).
#
# Needs two GPUs and PyTorch; without them it says so and exits 0. `--cpu` runs the same flow on two
# CPU processes (gloo): the steps, not a cluster's waits.
#
#   scripts/cp-attention-check.sh [--cpu] [probe flags, e.g. --seq 8192]
#   (PYTHON=the interpreter with torch, default python3; KAREUS=the binary, default build/kareus)
set -euo pipefail
cd "$(dirname "$0")/.."
device=cuda
if [ "${1:-}" = --cpu ]; then device=cpu; shift; fi
if [ "$device" = cuda ]; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  if [ "${gpus:-0}" -lt 2 ]; then
    echo "cp-attention-check: needs two NVIDIA GPUs, found ${gpus:-0}; nothing measured"
    exit 0
  fi
fi
kareus=${KAREUS:-build/kareus}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$(timeout "${LIMIT:-300}" "${PYTHON:-python3}" scripts/cp_attention_probe.py --device "$device" \
  --out "$dir/trace.json" "$@")
echo "$out"
[ -f "$dir/trace.json" ] || exit 0  # the probe said why it measured nothing
"$kareus" hw fit --engine-trace "$dir/trace.json" --out "$dir/engine.json"
