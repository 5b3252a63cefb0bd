#!/usr/bin/env bash
# Usage: chromium_report_test.sh plan|compare KAREUS PYTHON SOURCE_DIR WORK_DIR
# Writes the real report of `kareus plan` (the default job) or `kareus compare` (the same job) and
# loads it in headless Chromium at 1300 px and 480 px: every section renders, no console error,
# nothing loaded from outside the page, no text clipped by its box, the iso figures of the run on
# the page. Exit 77 where Chromium is not installed.
set -euo pipefail
command=$1 kareus=$2 python=$3 src=$4 work=$5
browser=("$python" "$src/scripts/report_browser.py")
if ! command -v "${CHROMIUM:-chromium}" >/dev/null; then
  echo "skipped: Chromium is not installed (scripts/install-deps.sh installs Debian's chromium)" >&2
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"

# The sentence the frontier plot must show, from the run's own figures (one decimal, as printed).
iso_sentence() {  # JSON_FILE PYTHON_EXPRESSION_FOR_THE_TWO_FIGURES
  "$python" - "$1" "$2" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
time_pct, energy_pct = eval(sys.argv[2], {"doc": doc})
print(f"Kareus against Perseus: {time_pct:.1f}% less energy at Perseus's fastest time, "
      f"{energy_pct:.1f}% less time at its lowest energy")
PY
}

if [ "$command" = plan ]; then
  "$kareus" plan --out "$work/out" >"$work/stdout" 2>"$work/stderr"
  sentence=$(iso_sentence "$work/out/summary.json" \
    '(doc["baselines"]["iso_time_energy_reduction_pct_vs_perseus"], doc["baselines"]["iso_energy_time_reduction_pct_vs_perseus"])')
  sections=(--section "Iteration time–energy frontier" --section "Chosen plan: SM clock per instruction"
            --section "Overlap decisions" --section "One partition's overlap")
  texts=(--text "$sentence" --text "chosen plan" --text "Megatron-LM" --text "Nanobatching+Perseus")
else
  "$kareus" compare --out "$work/out" >"$work/stdout" 2>"$work/stderr"
  sentence=$(iso_sentence "$work/out/compare.json" \
    '[(m["iso_time_energy_reduction_pct"], m["iso_energy_time_reduction_pct"]) for m in doc["configs"][0]["methods"] if m["method"] == "Kareus"][0]')
  config=$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["configs"][0]["config"])' "$work/out/compare.json")
  sections=(--section "$config")
  texts=(--text "$sentence" --text "Megatron-LM" --text "Nanobatching+Perseus")
fi
for width in 1300 480; do
  "${browser[@]}" check "$work/out/report.html" --width "$width" "${sections[@]}" "${texts[@]}"
done
