#!/usr/bin/env bash
# Measures the default job's four TP partitions (Llama 3.2 3B, TP 8: fwd_attn, fwd_mlp, bwd_attn,
# bwd_mlp) on this machine's one NVIDIA GPU at 3 SM clocks x 3 SM levels x 2 launch slots plus the
# sequential knob at each clock (21 knobs a partition, 84 in all; about 6 minutes, bounded at 8),
# and writes each knob beside the simulated GPU's prediction with the errors.
#
# One GPU stands in for its TP group: the collective is an on-device copy kernel with the knob's
# SMs moving the bytes the ring would move through this GPU (--collective copy), so the SM stealing
# and HBM traffic that interact with the compute are there, the link is not. Each knob: clock
# locked through the frequency controller (needs root or CAP_SYS_ADMIN), 0.5 s warm-up, a 3 s
# window read with the energy counter, 0.5 s cool-down. Attention runs through cuDNN's fused SDPA
# where cuDNN has a plan for its graph; the "Measuring on" line (and the journals) name the path,
# and the chunked cuBLASLt fallback with cuDNN's reason where it has none.
#
# Where there is no NVIDIA GPU it builds, says so and exits 0. `--fake` runs the same profile on a
# fake GPU driven by the simulated model (no GPU needed; it checks the flags and the outputs, its
# "errors" are zero by construction).
#
#   scripts/gpu-profile-check.sh [--fake]      (BUILD=dir build directory, OUT=dir results, GPU=N device)
# Results: $OUT/comparison.csv (partition, knob, measured and simulated time and energy, relative
# errors of the model), $OUT/measurements.csv, ranks.csv and the journals (a rerun resumes).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
out=${OUT:-gpu-profile-check}
device=nvml
[ "${1:-}" = "--fake" ] && device=fake

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
echo "gpu-profile-check: building kareus in $build/ ..." >&2
cmake --build "$build" -j"$(nproc)" --target kareus >/dev/null

gpu=a100-sxm4-40gb clocks=900:1410:255 sms=8,16,32
if [ "$device" = nvml ]; then
  if ! name=$(nvidia-smi --query-gpu=name --format=csv,noheader -i "${GPU:-0}" 2>/dev/null); then
    echo "gpu-profile-check: no NVIDIA GPU on this machine; the build works, nothing was measured."
    exit 0
  fi
  case "$name" in
    *H200*) gpu=h200 clocks=1200:1980:390 ;;
    *H100*) gpu=h100-sxm clocks=1200:1980:390 ;;
    *A100*) gpu=a100-sxm4-40gb clocks=900:1410:255 ;;
    *) echo "gpu-profile-check: no preset for '$name' (have A100, H100, H200)" >&2; exit 1 ;;
  esac
  export CUDA_VISIBLE_DEVICES=${GPU:-0}
  echo "gpu-profile-check: $name as preset $gpu, clocks $clocks MHz, collective SMs $sms" >&2
  # cuDNN's fused attention graphs against an fp32 causal reference (where the build has cuDNN).
  if cmake --build "$build" -j"$(nproc)" --target gpu_fused_attention_test >/dev/null 2>&1; then
    "$build/tests/executor/cuda/gpu_fused_attention_test" --gtest_brief=1 >&2 ||
      echo "gpu-profile-check: cuDNN's fused attention does not match the reference (see above)" >&2
  fi
fi

# Bounded: on SIGTERM the frequency controller resets the clocks before the process exits.
timeout --signal=TERM --kill-after=20 480 "$build/kareus" profile --gpu "$gpu" --device "$device" \
  --collective copy --partition fwd_attn,fwd_mlp,bwd_attn,bwd_mlp --mode exhaustive \
  --clocks "$clocks" --sms "$sms" --slots 2 --window 3 --warmup 0.5 --cool-down 0.5 --compare-sim --out "$out"

# Per partition: how far the simulated GPU is from the measurement (mean and worst |error|).
awk -F, 'NR > 1 {
  n[$1]++; t = ($9 < 0 ? -$9 : $9); e = ($10 < 0 ? -$10 : $10)
  st[$1] += t; se[$1] += e; if (t > mt[$1]) mt[$1] = t; if (e > me[$1]) me[$1] = e
}
END {
  printf "%-10s %5s %22s %22s\n", "partition", "knobs", "model time |err| mean/max", "energy |err| mean/max"
  for (k in n) printf "%-10s %5d %13.1f%% / %5.1f%% %13.1f%% / %5.1f%%\n", k, n[k], 100*st[k]/n[k], 100*mt[k], 100*se[k]/n[k], 100*me[k]
}' "$out/comparison.csv"
echo "gpu-profile-check: wrote $out/comparison.csv"
