#!/usr/bin/env python3
"""Compares `kareus frontier` with Perseus's published frontiers and its re-evaluated true plans.

For every point of the reference (time t, energy e): ours = our lowest true energy at time <= t;
reports the gap (ours - e) / e. Usage: bench/compare_perseus.py [build/kareus] [extra flags...]
"""
import csv
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data" / "perseus-sosp24"
KAREUS = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "build" / "kareus")
EXTRA = sys.argv[2:]


def frontier(model, m):
    out = subprocess.run(
        [KAREUS, "frontier", "--profile", str(DATA / "stage_profile" / f"{model}+a100_sxm_bf16.csv"),
         "--stages", "8", "--microbatches", str(m), "--p-blocking", "83.64", "--csv", *EXTRA],
        check=True, capture_output=True, text=True).stdout.splitlines()
    return [(float(r["time_s"]), float(r["energy_j"])) for r in csv.DictReader(out)]


def gaps(ours, reference):
    result = []
    for t, e in reference:
        fits = [oe for ot, oe in ours if ot <= t * (1 + 1e-12)]
        result.append((min(fits) - e) / e if fits else None)
    return result


def read(path, tcol, ecol):
    return [(float(r[tcol]), float(r[ecol])) for r in csv.DictReader(open(path))]


print(f"{'profile':<14}{'M':>4}  {'vs published: worst':>20} {'mean':>8} {'best':>8} {'unreachable':>11}"
      f"   {'vs true: worst':>15} {'mean':>8} {'best':>8}")
for model in ["gpt3-175b", "bloom"]:
    for m in [12, 24, 48, 96]:
        ours = frontier(model, m)
        pub = read(DATA / "iteration_time_energy" / "a100_sxm" / f"{model}_bf16_mb{m}.csv", "time", "energy")
        g = gaps(ours, pub)
        reach = [x for x in g if x is not None]
        line = (f"{model:<14}{m:>4}  {100*max(reach):>19.3f}% {100*sum(reach)/len(reach):>7.3f}% "
                f"{100*min(reach):>7.3f}% {len(g)-len(reach):>11}")
        true_path = DATA / "perseus_true" / f"{model}_a100_mb{m}.csv"
        if true_path.exists():
            gt = gaps(ours, read(true_path, "time_s", "energy_j"))
            rt = [x for x in gt if x is not None]
            line += (f"   {100*max(rt) if len(rt)==len(gt) else float('nan'):>14.3f}% "
                     f"{100*sum(rt)/len(rt):>7.3f}% {100*min(rt):>7.3f}%")
            if len(rt) != len(gt):
                line += f" ({len(gt)-len(rt)} faster than ours)"
        print(line, flush=True)
