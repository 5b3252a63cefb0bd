#!/usr/bin/env bash
# Measures, on this machine's GPU, what each call an engine file prices costs the host (an eager
# ATen op, a module call, a TransformerEngine Linear where it is installed, an event record, a
# torch.distributed collective call, an op issued to an idle GPU) and prints the figures beside the
# engine's constants (data/engines/megatron-te-eager.json, or ENGINE=file). Bounded: a few seconds,
# at most LIMIT seconds (default 120).
#
# Needs PyTorch with CUDA; without a GPU, or without PyTorch, it says so and exits 0. `--cpu`
# measures the same calls on CPU tensors (the flow, and this host's Python cost, not a cluster's).
#
#   scripts/host-overhead-check.sh [--cpu]   (PYTHON=the interpreter with torch, default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
device=cuda
[ "${1:-}" = "--cpu" ] && device=cpu
if [ "$device" = cuda ] && ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "host-overhead-check: no NVIDIA GPU here (nvidia-smi not found); nothing measured"
  exit 0
fi
exec timeout "${LIMIT:-120}" "${PYTHON:-python3}" scripts/host_overhead_probe.py --device "$device" \
  --engine "${ENGINE:-data/engines/megatron-te-eager.json}"
