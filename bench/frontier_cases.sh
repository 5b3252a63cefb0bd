#!/usr/bin/env bash
# The frontier solver on the cases its speed and exactness are judged by: GPT-3 and BLOOM (Perseus's
# A100 stage profiles) at 8 stages and M = 12, 24, 48, 96; the default job's composed table (as
# `kareus plan --stage-options` writes it); interleaved 16 x 128 with V = 2 (the GPT-3 profile's 8
# stages twice over). Each runs at the default options and converged (no local search budget nor
# round limit, stopped after FRONTIER_CONVERGE_LIMIT seconds, default 120): plans, local search
# rounds and expansions, whether it converged, wall time and peak memory. FRONTIER_CALLGRIND=1 adds
# the default run's instructions (valgrind's callgrind on one core; minutes for the largest).
# FRONTIER_CASES, a regular expression, picks cases by name. Wall times on a shared machine swing;
# compare a change by its instructions, or in one run.
#
# Usage: bench/frontier_cases.sh [BUILD_DIR]
# Prints a Markdown table; writes nothing else (its inputs go to a temporary directory).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
limit=${FRONTIER_CONVERGE_LIMIT:-120}
cmake --build "$build" -j"$(nproc)" --target kareus >/dev/null
kareus=$build/kareus
profiles=$root/data/perseus-sosp24/stage_profile
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The default job's composed table and its P_blocking (the plan's static power).
"$kareus" plan --stage-options "$work/table.csv" --out "$work/plan" >/dev/null 2>&1
p_table=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["p_static_w"])' "$work/plan/summary.json")
# GPT-3's 8 stages twice over: stages 8-15 a copy of 0-7.
awk -F, 'NR == 1 { print; next } { print } { line[NR] = $0 }
  END { for (i = 2; i <= NR; ++i) { split(line[i], f, ","); f[1] += 8; s = f[1]; for (k = 2; k in f; ++k) s = s "," f[k]; print s } }' \
  "$profiles/gpt3-175b+a100_sxm_bf16.csv" >"$work/gpt3-16.csv"

cases=()
for m in 12 24 48 96; do
  cases+=("GPT-3 8 x $m|--profile $profiles/gpt3-175b+a100_sxm_bf16.csv --stages 8 --microbatches $m --p-blocking 83.64")
done
for m in 12 24 48 96; do
  cases+=("BLOOM 8 x $m|--profile $profiles/bloom+a100_sxm_bf16.csv --stages 8 --microbatches $m --p-blocking 83.64")
done
cases+=("the default job's composed table, 2 x 8|--profile $work/table.csv --stages 2 --microbatches 8 --p-blocking $p_table")
cases+=("interleaved 16 x 128, V = 2|--profile $work/gpt3-16.csv --stages 16 --microbatches 128 --schedule interleaved --virtual-stages 2 --p-blocking 83.64")

# One run: "plans|rounds|expansions|converged|wall_s|peak_MB", or "|||not within ${limit} s||" when cut off.
run() {
  local seconds=$1; shift
  if ! /usr/bin/time -f '%e %M' -o "$work/time" timeout "$seconds" "$kareus" frontier "$@" >"$work/out" 2>"$work/err"; then
    if grep -q 'Command exited with non-zero status 124' "$work/time"; then echo "|||not within ${seconds} s||"; return; fi
    cat "$work/err" >&2
    exit 1
  fi
  python3 - "$work/out" "$work/time" <<'EOF'
import re, sys
summary = open(sys.argv[1]).read()
wall, peak_kb = open(sys.argv[2]).read().split()[-2:]
plans = re.search(r"(\d+) Pareto plans", summary).group(1)
search = re.search(r"local search (converged in|stopped [^(]*?after(?: its)?) (\d+) rounds \((?:--local-search-(?:rounds|budget); )?(\d+) expansions",
                   summary)
converged = "yes" if search.group(1) == "converged in" else "no"
print(f"{plans}|{search.group(2)}|{search.group(3)}|{converged}|{float(wall):.2f}|{int(peak_kb) / 1024:.0f}")
EOF
}

instructions() {
  taskset -c 0 valgrind --tool=callgrind --callgrind-out-file=/dev/null "$kareus" frontier "$@" 2>&1 >/dev/null |
    awk '/Collected/ { printf "%.3f G", $NF / 1e9 }'
}

echo "| case | default: plans, rounds, expansions, converged | wall s | peak MB |$([ "${FRONTIER_CALLGRIND:-0}" = 1 ] && echo ' instructions |') converged: rounds, expansions, wall s |"
echo "|---|---|---:|---:|$([ "${FRONTIER_CALLGRIND:-0}" = 1 ] && echo '---:|')---|"
for c in "${cases[@]}"; do
  name=${c%%|*}
  [[ $name =~ ${FRONTIER_CASES:-.} ]] || continue
  read -r -a args <<<"${c#*|}"
  result=$(run 600 "${args[@]}")  # a failure ends the script here
  IFS='|' read -r plans rounds expansions converged wall peak <<<"$result"
  row="| $name | $plans, $rounds, $expansions, $converged | $wall | $peak |"
  if [ "${FRONTIER_CALLGRIND:-0}" = 1 ]; then row+=" $(instructions "${args[@]}") |"; fi
  if [ "$converged" = yes ]; then
    row+=" as the default |"
  else
    result=$(run "$limit" "${args[@]}" --local-search-budget 1e15 --local-search-rounds 1000000)
    IFS='|' read -r _ rounds expansions converged wall _ <<<"$result"
    if [ "$converged" = yes ]; then row+=" $rounds, $expansions, $wall |"
    elif [ "$converged" = no ]; then row+=" not converged after $rounds rounds ($expansions expansions), $wall |"
    else row+=" $converged |"; fi
  fi
  echo "$row"
done
