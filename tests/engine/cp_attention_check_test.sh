#!/usr/bin/env bash
# scripts/cp-attention-check.sh: without two GPUs it says so and exits 0; on CPU (where some python3
# has PyTorch with torch.distributed) the probe's labelled trace goes through hw fit --engine-trace.
set -euo pipefail
root=$1
kareus=$2
out=$(KAREUS=$kareus "$root/scripts/cp-attention-check.sh" </dev/null 2>&1) || { echo "GPU mode failed: $out"; exit 1; }
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)" -lt 2 ]; then
  grep -q "nothing measured" <<<"$out" || { echo "expected 'nothing measured', got: $out"; exit 1; }
fi
python=
for p in python3 /usr/bin/python3; do
  if "$p" -c "import torch, torch.distributed as d; assert d.is_available()" 2>/dev/null; then python=$p; break; fi
done
if [ -z "$python" ]; then
  out=$(PYTHON=python3 KAREUS=$kareus "$root/scripts/cp-attention-check.sh" --cpu 2>&1)
  grep -Eq "PyTorch is not installed|no torch.distributed" <<<"$out" || { echo "expected the missing-PyTorch line, got: $out"; exit 1; }
  echo "no python3 with PyTorch and torch.distributed here: checked the message only"
  exit 0
fi
out=$(PYTHON=$python KAREUS=$kareus "$root/scripts/cp-attention-check.sh" --cpu --passes 3 --check 2>&1)
# Three passes, each a labelled forward and a labelled backward on rank 0's thread(s).
for row in "match causal attention over the whole sequence" "3 forward and backward passes of plain PyTorch" "layer_op_us +6 " "no CUDA runtime calls"; do
  grep -Eq "$row" <<<"$out" || { echo "missing '$row' in: $out"; exit 1; }
done
echo "$out"
