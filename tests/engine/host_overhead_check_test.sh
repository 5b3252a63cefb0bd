#!/usr/bin/env bash
# scripts/host-overhead-check.sh: without a GPU it says so and exits 0; on CPU tensors (where some
# python3 has PyTorch) it prints every call it measures beside the engine's constants.
set -euo pipefail
root=$1
out=$("$root/scripts/host-overhead-check.sh" </dev/null 2>&1) || { echo "GPU mode failed: $out"; exit 1; }
if ! command -v nvidia-smi >/dev/null 2>&1; then
  grep -q "nothing measured" <<<"$out" || { echo "expected 'nothing measured', got: $out"; exit 1; }
fi
python=
for p in python3 /usr/bin/python3; do
  if "$p" -c "import torch" 2>/dev/null; then python=$p; break; fi
done
if [ -z "$python" ]; then
  out=$("$root/scripts/host-overhead-check.sh" --cpu 2>&1)
  grep -q "PyTorch is not installed" <<<"$out" || { echo "expected the missing-PyTorch line, got: $out"; exit 1; }
  echo "no python3 with PyTorch here: checked the message only"
  exit 0
fi
out=$(PYTHON=$python "$root/scripts/host-overhead-check.sh" --cpu 2>/dev/null)
for row in "measured_us" "eager_op" "linear_module" "collective_call .* 10.9  collective_call_us"; do
  grep -Eq "$row" <<<"$out" || { echo "missing '$row' in: $out"; exit 1; }
done
echo "$out"
