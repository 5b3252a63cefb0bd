#!/usr/bin/env bash
# Measures what overlapping a collective with compute costs on this node's 8 A100s and holds the
# result against the Kareus cluster's measured plans: the check the simulated GPU's overlap needs
# real GPUs for (its Nanobatching+Perseus gain over Perseus, data/kareus-osdi26).
#
# For each of the Kareus evaluation's two layouts (TP 8; CP 2 x TP 4) it profiles a few layer
# partitions of Llama 3.2 3B (hidden dropout 0.1, as the artifact runs) with real NCCL collectives,
# one rank per GPU, sequential and overlapped at 2 clocks x 3 SM counts x every launch slot
# (`kareus profile --mode exhaustive`; about 6 minutes a layout, bounded at 10), fits overlap's two
# interference factors to every overlapped knob's time over the sequential knob's at its clock
# (`kareus hw fit --partitions`), and runs `kareus hw check --plans` with the fitted GPU beside the
# plain preset. Nothing of the plans is fitted: they are the check.
#
# Needs 8 NVIDIA GPUs, the CUDA toolkit, MPI and clock control (root or CAP_SYS_ADMIN); without
# them it builds, says what is missing and exits 0. `--fake` runs the same flow on one process with
# fake GPUs driven by the simulated model (its factors come out 1: it checks the flow, not the GPU).
#
#   scripts/overlap-check.sh [--fake]   (BUILD=dir build directory, OUT=dir results,
#                                        KAREUS=path a built kareus, MPIRUN="mpirun ..." the launcher)
# Results: $OUT/<layout>/ (journals, measurements.csv), $OUT/cluster.json (the fitted GPU),
# $OUT/check.txt (hw check --plans with it).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
out=${OUT:-overlap-check}
fake=0
[ "${1:-}" = "--fake" ] && fake=1

kareus=${KAREUS:-}
if [ -z "$kareus" ]; then
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  fi
  echo "overlap-check: building kareus in $build/ ..." >&2
  cmake --build "$build" -j"$(nproc)" --target kareus >/dev/null
  kareus=$build/kareus
fi

base=a100-sxm4-40gb
launch=()
device=nvml
window=(--window 2 --warmup 0.5 --cool-down 0.5)
if [ "$fake" = 1 ]; then
  device=fake
  window=(--window 0.05 --warmup 0 --cool-down 0)
else
  names=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || true)
  count=$(grep -c . <<<"$names" || true)
  if [ "$count" -lt 8 ]; then
    echo "overlap-check: needs 8 NVIDIA GPUs, found ${count}; the build works, nothing was measured."
    exit 0
  fi
  if ! grep -q A100 <<<"$names"; then
    echo "overlap-check: the plans it checks against ran on A100 SXM4 40GB; these GPUs are: $(head -1 <<<"$names")" >&2
  fi
  read -r -a launch <<<"${MPIRUN:-mpirun -np 8}"
fi
mkdir -p "$out"

# layout name, parallel flags, partitions measured
layouts=(
  "tp8 --tp 8 --cp 1 fwd_attn,fwd_mlp,bwd_attn,bwd_mlp"
  "cp2tp4 --tp 4 --cp 2 fwd_qkv_ar,fwd_ao_ag,fwd_mlp,bwd_mlp,bwd_o_ag"
)
partition_dirs=()
for layout in "${layouts[@]}"; do
  read -r name tp_flag tp cp_flag cp partitions <<<"$layout"
  echo "overlap-check: profiling $name ($partitions) ..." >&2
  # Bounded: on SIGTERM the frequency controller resets the clocks before the process exits.
  timeout --signal=TERM --kill-after=20 600 "${launch[@]}" "$kareus" profile --gpu "$base" --device "$device" \
    --collective nccl "$tp_flag" "$tp" "$cp_flag" "$cp" --hidden-dropout 0.1 --partition "$partitions" \
    --mode exhaustive --clocks 1110:1410:300 --sms 16,24,32 "${window[@]}" --out "$out/$name" >&2
  partition_dirs+=(--partitions "$out/$name")
done

"$kareus" hw fit --base-gpu "$base" "${partition_dirs[@]}" --out "$out/cluster.json" >"$out/fit.txt"
sed -n 1,2p "$out/fit.txt"  # what was fitted, and the factors
echo "  overlapped over sequential time, median error: $(tail -1 "$out/fit.txt")"
{
  echo "# the fitted GPU ($out/cluster.json)"
  "$kareus" hw check --gpu "$out/cluster.json" --plans data/kareus-osdi26/plans.csv
  echo
  echo "# the plain preset ($base)"
  "$kareus" hw check --gpu "$base" --plans data/kareus-osdi26/plans.csv
} >"$out/check.txt"
# Each GPU's Nanobatching+Perseus gain table and summary line.
awk '/^# / { print } /max-throughput time gain/ { n = 6 } n > 0 { print; n-- } /^time_err_median=/ { print; print "" }' \
  "$out/check.txt"
echo "overlap-check: wrote $out/cluster.json, $out/fit.txt and $out/check.txt"
