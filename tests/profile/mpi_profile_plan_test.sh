#!/usr/bin/env bash
# The measure-then-plan chain on a grid other than the search's default (900:1410:30 MHz, 3..30 SMs
# in steps of 3): `kareus profile` on 2 fake ranks measures every knob of CLOCKS x SMS (default
# 1210:1410:100 x 8,16), and `kareus plan` on that table uses every one of them, reporting none left
# out, with more than one frontier point, and its plans run only measured knobs, some of them at an SM
# count off the default grid; `kareus search` on the same table searches the same knobs.
# Usage: mpi_profile_plan_test.sh KAREUS MPIEXEC [CLOCKS SMS]
set -euo pipefail
kareus=$1
mpiexec=$2
clocks=${3:-1210:1410:100}
sms=${4:-8,16}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mpi=("$mpiexec" --oversubscribe -np 2)
[ "$(id -u)" -eq 0 ] && mpi=("$mpiexec" --allow-run-as-root --oversubscribe -np 2)
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1

"${mpi[@]}" "$kareus" profile --device fake --tp 2 --clocks "$clocks" --sms "$sms" --mode exhaustive \
  --window 1 --warmup 0.1 --cool-down 0.01 --out "$dir/profile" > "$dir/profile.log"
"$kareus" plan --tp 2 --evaluator "table:$dir/profile/measurements.csv" --out "$dir/plan" > "$dir/plan.log" 2> "$dir/plan.err"
"$kareus" search --tp 2 --partition all --mode exhaustive --evaluator "table:$dir/profile/measurements.csv" \
  --out "$dir/search" > "$dir/search.log" 2>&1

python3 - "$dir" "$clocks" "$sms" <<'PY'
import csv, json, sys
d, clocks, sms = sys.argv[1:]
with open(f"{d}/profile/measurements.csv") as f:
    measured = list(csv.DictReader(f))
kareus = json.load(open(f"{d}/plan/summary.json"))
assert len(measured) > 100, len(measured)
assert kareus["measurements"] == len(measured), (kareus["measurements"], len(measured))
assert kareus["unusable_table_knobs"] == 0, kareus["unusable_table_knobs"]
assert kareus["frontier_points"] > 1, kareus["frontier_points"]
# Every knob the plans run is one the profile measured, and some run an SM count off the default grid:
# the chain did not fall back to the search's own levels.
knobs = {(r["partition"], float(r["freq_mhz"]), int(r["sms"]), r["slot"]) for r in measured}
plans = json.load(open(f"{d}/plan/plans.json"))["plans"]
sms_used = set()
for plan in plans:
    for stage in plan["stages"]:
        for ins in stage["instructions"]:
            for k in ins["knob"]["partitions"]:
                assert (k["key"], float(ins["freq_mhz"]), int(k["sms"]), k["slot"]) in knobs, (ins, k)
                if k["slot"] != "none":
                    sms_used.add(int(k["sms"]))
measured_sms = {int(r["sms"]) for r in measured if r["slot"] != "none"}
assert measured_sms == {int(x) for x in sms.split(",")}, measured_sms
assert sms_used and sms_used <= measured_sms, (sms_used, measured_sms)
assert any(n % 3 or not 3 <= n <= 30 for n in sms_used), sms_used
searched = json.load(open(f"{d}/search/summary.json"))["partitions"]
by_key = {}
for r in measured:
    by_key[r["partition"]] = by_key.get(r["partition"], 0) + 1
for key, part in searched.items():
    assert part["measured_knobs"] == by_key[key], (key, part["measured_knobs"], by_key[key])
    assert part["unusable_knobs"] == 0, (key, part)
print(f"profile -> plan: {len(measured)} knobs measured on {clocks} x SMs {sms}, all {kareus['measurements']} used, "
      f"{kareus['frontier_points']} frontier points, the plans run SMs {sorted(sms_used)}")
PY
echo "ok"
