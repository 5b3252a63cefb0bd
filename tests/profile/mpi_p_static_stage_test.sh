#!/usr/bin/env bash
# On 2 MPI ranks over loopback with fake GPUs: P_static (rank 0 waits in a receive while rank 1
# idles) is the static power of the GPU description used, over a window as long as the wait, and
# its gpu.json loads back as a GPU with that static power; a whole-stage sweep (TP 2, PP 2, one
# rank per TP member) writes a Perseus profile that `kareus frontier` reads and plans from, with
# P_blocking the P_static just measured; a rerun of the sweep measures nothing again.
# Usage: mpi_p_static_stage_test.sh KAREUS MPIEXEC DATA_DIR
set -euo pipefail
kareus=$1
mpiexec=$2
data=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mpi=("$mpiexec" --oversubscribe -np 2)
[ "$(id -u)" -eq 0 ] && mpi=("$mpiexec" --allow-run-as-root --oversubscribe -np 2)
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1

"${mpi[@]}" "$kareus" profile --device fake --gpu h200 --tp 2 --p-static --window 3 --cool-down 0.05 \
  --clocks 1200:1980:390 --out "$dir/ps" > "$dir/ps.log"
"$kareus" hw show --gpu "$dir/ps/gpu.json" > "$dir/hw.log"
python3 - "$dir" "$data" <<'PY'
import json, sys
d, data = sys.argv[1], sys.argv[2]
ps = json.load(open(f"{d}/ps/p_static.json"))
want = json.load(open(f"{data}/gpus/h200.json"))["static_power_w"]
assert abs(ps["p_static_w"] - want) <= 1e-6 * want, (ps, want)
assert abs(ps["window_s"] - 3) < 1e-6, ps               # the receiver waited out the sender's idle
assert abs(ps["energy_j"] - want * 3) < 1e-4 * want, ps
assert ps["clock_mhz"] == 1980 and ps["simulated"] is True, ps
gpu = json.load(open(f"{d}/ps/gpu.json"))
assert abs(gpu["static_power_w"] - ps["p_static_w"]) < 1e-9, gpu
print(f"p_static: {ps['p_static_w']:.2f} W over {ps['window_s']:.2f} s")
PY
grep -q "P_static = " "$dir/ps.log" || { cat "$dir/ps.log"; exit 1; }
grep -Eq "static power +150 W" "$dir/hw.log" || { echo "gpu.json does not load with its static power"; cat "$dir/hw.log"; exit 1; }

sweep=(profile --device fake --gpu h200 --tp 2 --pp 2 --stage-sweep --clocks 1200:1980:390 --window 1 --warmup 0.1
       --cool-down 0.01 --out "$dir/sweep")
"${mpi[@]}" "$kareus" "${sweep[@]}" > "$dir/sweep.log"
grep -q "^12 measured now" "$dir/sweep.log" || { cat "$dir/sweep.log"; exit 1; }
"${mpi[@]}" "$kareus" "${sweep[@]}" > "$dir/again.log"
grep -q "^0 measured now" "$dir/again.log" || { cat "$dir/again.log"; exit 1; }
p_blocking=$(python3 -c "import json; print(json.load(open('$dir/ps/p_static.json'))['p_static_w'])")
"$kareus" frontier --profile "$dir/sweep/stage_profile.csv" --stages 2 --microbatches 4 --p-blocking "$p_blocking" \
  --csv > "$dir/frontier.csv"
python3 - "$dir" <<'PY'
import csv, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(f"{d}/sweep/stage_profile.csv")))
assert [r for r in rows][0].keys() >= {"stage", "instruction", "frequency", "time", "energy"}, rows[0]
assert {(r["stage"], r["instruction"], float(r["frequency"])) for r in rows} == {
    (s, i, f) for s in ("0", "1") for i in ("forward", "backward") for f in (1200.0, 1590.0, 1980.0)}, rows
for s in ("0", "1"):
    for i in ("forward", "backward"):
        t = [float(r["time"]) for r in rows if r["stage"] == s and r["instruction"] == i]
        assert t == sorted(t, reverse=True), (s, i, t)   # a higher clock runs the stage faster
front = list(csv.reader(open(f"{d}/frontier.csv")))
assert len(front) >= 2, front
print(f"stage sweep: {len(rows)} options, frontier of {len(front) - 1} points")
PY
echo "ok"
