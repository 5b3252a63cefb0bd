#!/usr/bin/env python3
"""Fronts against the relaxation's bound at evenly spaced deadlines.

Each FRONT is a `kareus frontier --bound --csv` output (time_s, energy_j, ..., bound_j). At N
deadlines evenly over the span every front covers, a front's figure is the least energy of its plans
no slower than the deadline, against the bound there (interpolated between the plans' own bounds,
of all fronts together: the bound is convex, so between two plans this reads it a hair high). The
first front is the base the others are compared with.

Usage: bench/front_gaps.py BASE.csv [OTHER.csv ...] [--deadlines N]
"""
import argparse
import bisect
import csv


def read_front(path):
    with open(path, newline="") as f:
        rows = [(float(r["time_s"]), float(r["energy_j"]), float(r["bound_j"])) for r in csv.DictReader(f)]
    if not rows:
        raise SystemExit(f"{path}: no plans")
    return sorted(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fronts", nargs="+", help="kareus frontier --bound --csv outputs, the base first")
    parser.add_argument("--deadlines", type=int, default=1000)
    args = parser.parse_args()
    fronts = [read_front(p) for p in args.fronts]
    bound_at = sorted({(t, b) for front in fronts for t, _, b in front})
    times = [t for t, _ in bound_at]

    def bound(deadline):
        i = bisect.bisect_left(times, deadline)
        if i == 0 or i == len(times):
            return bound_at[min(i, len(times) - 1)][1]
        (t0, b0), (t1, b1) = bound_at[i - 1], bound_at[i]
        return b1 if t1 == t0 else b0 + (b1 - b0) * (deadline - t0) / (t1 - t0)

    def least_energy(front, deadline):
        i = bisect.bisect_right([t for t, _, _ in front], deadline)
        return min(e for _, e, _ in front[:i])

    lo = max(front[0][0] for front in fronts)
    hi = min(front[-1][0] for front in fronts)
    n = args.deadlines
    deadlines = [lo + (hi - lo) * k / (n - 1) for k in range(n)]
    gaps = [[least_energy(front, d) / bound(d) - 1 for d in deadlines] for front in fronts]
    print("front,plans,worst_gap_pct,mean_gap_pct,below_base_by_up_to_pct,above_base_by_up_to_pct")
    for path, front, g in zip(args.fronts, fronts, gaps):
        below = max(b - x for b, x in zip(gaps[0], g))
        above = max(x - b for b, x in zip(gaps[0], g))
        print(f"{path},{len(front)},{100 * max(g):.3f},{100 * sum(g) / n:.3f},{100 * below:.3f},{100 * above:.3f}")


if __name__ == "__main__":
    main()
