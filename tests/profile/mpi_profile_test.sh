#!/usr/bin/env bash
# The fake-GPU profile on 4 MPI ranks over loopback (TP 2 x CP 2): rank 0 searches and every rank
# measures; checks that a knob's time is the slowest rank's and its energy the mean per GPU, that a
# run cut short by its budget resumes without measuring a knob twice, that the 4-rank figures are
# the 1-rank ones scaled by the slowest rank's slowdown, and that ranks started for different
# workloads refuse to run.
# Usage: mpi_profile_test.sh KAREUS MPIEXEC
set -euo pipefail
kareus=$1
mpiexec=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mpi=("$mpiexec" --oversubscribe -np 4)
[ "$(id -u)" -eq 0 ] && mpi=("$mpiexec" --allow-run-as-root --oversubscribe -np 4)
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1

common=(profile --device fake --tp 2 --cp 2 --seq 8192 --partition fwd_mlp,fwd_qkv_ag --mode exhaustive
        --clocks 1210:1410:100 --sms 4,8 --slots 2 --window 2 --warmup 0.2 --cool-down 0.01)
# Rank r runs 1 + 0.1 r times slower: the slowest (rank 3) is 1.3 times the model.
"${mpi[@]}" "$kareus" "${common[@]}" --fake-rank-slowdown 0.1 --budget 4 --out "$dir/four" > "$dir/first.log"
"${mpi[@]}" "$kareus" "${common[@]}" --fake-rank-slowdown 0.1 --out "$dir/four" > "$dir/second.log"
"$kareus" "${common[@]}" --out "$dir/one" > "$dir/one.log"

python3 - "$dir" <<'PY'
import csv, json, sys
from collections import defaultdict
d = sys.argv[1]
def rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))
def knob(r):
    return (r["partition"], float(r["freq_mhz"]), int(r["sms"]), r["slot"])
four = {knob(r): r for r in rows(f"{d}/four/measurements.csv")}
one = {knob(r): r for r in rows(f"{d}/one/measurements.csv")}
assert len(four) == 2 * 3 * (1 + 2 * 2), len(four)
assert four.keys() == one.keys()
ranks = defaultdict(list)
for r in rows(f"{d}/four/ranks.csv"):
    ranks[knob(r)].append(r)
for k, m in four.items():
    per = ranks[k]
    assert sorted(int(r["rank"]) for r in per) == [0, 1, 2, 3], (k, per)  # measured once, on 4 ranks
    assert len({r["repetitions"] for r in per}) == 1, per  # every rank ran the same count
    t = [float(r["time_s"]) for r in per]
    e = [float(r["energy_j"]) for r in per]
    assert abs(float(m["time_s"]) - max(t)) <= 1e-8 * max(t), (k, m, t)
    assert abs(float(m["energy_j"]) - sum(e) / 4) <= 1e-8 * sum(e), (k, m, e)
    assert abs(float(m["time_s"]) / float(one[k]["time_s"]) - 1.3) < 1e-6, (k, m["time_s"], one[k]["time_s"])
for key in ("fwd_mlp", "fwd_qkv_ag"):
    with open(f"{d}/four/{key}.journal.jsonl") as f:
        lines = [json.loads(l) for l in f if l.strip()][1:]
    knobs = [(l["freq"], l["sm"], l["overlap_start"]) for l in lines]
    assert len(knobs) == len(set(knobs)) == 15, (key, len(knobs), len(set(knobs)))
print("mpi profile: 30 knobs on 4 ranks, time = slowest rank, energy = mean per GPU, resumed without repeats")
PY
grep -q "22 knobs measured now" "$dir/second.log" || { echo "the resumed run did not measure the 22 knobs left (4 of each partition were)"; cat "$dir/second.log"; exit 1; }

# Ranks started for different workloads refuse (every rank says so; mpirun fails).
if "$mpiexec" $( [ "$(id -u)" -eq 0 ] && echo --allow-run-as-root ) --oversubscribe \
    -np 2 "$kareus" "${common[@]}" --out "$dir/mixed" : -np 2 "$kareus" "${common[@]}" --mbs 4 --out "$dir/mixed" \
    > "$dir/mixed.log" 2>&1; then
  echo "ranks with different workloads ran"; exit 1
fi
grep -q "different workloads" "$dir/mixed.log" || { cat "$dir/mixed.log"; exit 1; }
echo "ok"
