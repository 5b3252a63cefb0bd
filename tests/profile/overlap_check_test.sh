#!/usr/bin/env bash
# scripts/overlap-check.sh --fake end to end: profiles both layouts on fake GPUs driven by the
# simulated model, fits overlap's factors (1: the fake GPUs are the plain model) and checks the
# Kareus cluster's plans with the fitted GPU, whose figures must then be the plain preset's.
#   overlap_check_test.sh KAREUS_BINARY OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$2"
output=$(KAREUS="$1" OUT="$2" "$here/../../scripts/overlap-check.sh" --fake 2>/dev/null)
echo "$output"
grep -q "compute 1.0000x slower beside a moving collective, the collective 1.0000x slower beside compute" <<<"$output"
grep -q "fake NVIDIA A100 SXM4 40GB" "$2/fit.txt"
for layout in tp8 cp2tp4; do test -s "$2/$layout/measurements.csv"; done
# Both GPUs' sections of check.txt: the same gain table and summary line.
fitted=$(awk '/^# the plain preset/ { exit } /gain over Perseus/,0' "$2/check.txt" | grep -E "seq|err_median")
plain=$(awk '/^# the plain preset/ { p = 1 } p' "$2/check.txt" | awk '/gain over Perseus/,0' | grep -E "seq|err_median")
test -n "$fitted" && [ "$fitted" = "$plain" ]
grep -q "llama-3.2-3b tp8 cp1 mbs8 seq4096" <<<"$fitted"
