#!/usr/bin/env python3
"""The frontier against a mixed-integer program for the deadline problem, solved by HiGHS.

For a deadline T: pick one option per instruction (binary x[v,k]) and start times s[v] >= 0 with
s[w] >= s[v] + d[v] along every dependency, s[v] + d[v] <= T, d[v] = sum_k t[k] x[v,k]; minimise the
true iteration energy sum_k E[k] x[v,k] + P * (S*T - sum_v d[v]) (one GPU per stage, idle time at
P_blocking). The schedule and its dependencies are rebuilt here from their definition, not read from
Kareus. At ~20 deadlines across `kareus frontier`'s own front, the gap is (ours - MIP) / MIP with
"ours" the least energy of a frontier plan no slower than T; HiGHS's own optimality gap at each
deadline is printed beside it (and the gap to its dual bound, which holds even when the time limit
stops it short).

Needs highspy (PyPI), in a venv: python3 -m venv .venv && .venv/bin/pip install highspy

  .venv/bin/python bench/mip_reference.py --profile data/perseus-sosp24/stage_profile/gpt3-175b+a100_sxm_bf16.csv \
      --stages 8 --microbatches 12 --p-blocking 83.64
"""
import argparse
import csv
import json
import subprocess
import sys
import time

import highspy
import numpy as np


def read_profile(path, stages):
    options = {}  # (stage, "forward"|"backward") -> [(time_s, energy_j)]
    with open(path) as f:
        for row in csv.DictReader(f):
            key = (int(row["stage"]), row["instruction"])
            if key[0] < stages:
                options.setdefault(key, []).append((float(row["time"]), float(row["energy"])))
    return options


def stage_orders(kind, stages, microbatches):
    """Per stage, its instructions (type, microbatch) in order: 1F1B as Perseus and Merak order it
    (min(S-s-1, M) warm-up forwards, then forward/backward alternating, then the remaining
    backwards), or GPipe (every forward, then every backward)."""
    orders = []
    for s in range(stages):
        if kind == "gpipe":
            orders.append([("forward", m) for m in range(microbatches)] + [("backward", m) for m in range(microbatches)])
            continue
        warmup = min(stages - s - 1, microbatches)
        order = [("forward", m) for m in range(warmup)]
        f, b = warmup, 0
        while f < microbatches:
            order.append(("forward", f))
            f += 1
            order.append(("backward", b))
            b += 1
        order += [("backward", m) for m in range(b, microbatches)]
        orders.append(order)
    return orders


def dependencies(orders):
    """Nodes (stage, type, microbatch) and edges: each stage's order; forward m from stage s-1 to s;
    backward m from stage s+1 to s; at the last stage backward m after forward m."""
    stages = len(orders)
    nodes = [(s, t, m) for s in range(stages) for (t, m) in orders[s]]
    index = {n: i for i, n in enumerate(nodes)}
    edges = set()
    for s in range(stages):
        for a, b in zip(orders[s], orders[s][1:]):
            edges.add((index[(s, *a)], index[(s, *b)]))
        for (t, m) in orders[s]:
            if t == "forward" and s > 0:
                edges.add((index[(s - 1, "forward", m)], index[(s, "forward", m)]))
            if t == "backward":
                source = (s + 1, "backward", m) if s + 1 < stages else (s, "forward", m)
                edges.add((index[source], index[(s, "backward", m)]))
    return nodes, sorted(edges)


def solve_deadline(nodes, edges, options, stages, p_w, deadline_s, time_limit_s, rel_gap, relax=False):
    """Least true energy within the deadline: (objective, dual bound, HiGHS's MIP gap, status, plan), the
    plan HiGHS found as each node's chosen (time_s, energy_j), or None without one. With `relax`, of the
    linear relaxation (each x in [0, 1]): its optimum is both objective and bound, and there is no plan."""
    columns = []  # (node, time, energy) per binary column
    first = []
    for (s, t, _m) in nodes:
        first.append(len(columns))
        for (time_s, energy_j) in options[(s, t)]:
            columns.append((time_s, energy_j))
    first.append(len(columns))
    nx, n = len(columns), len(nodes)
    # Columns: x (binary), then s (start times). Objective: effective energy E - P*t, + P*S*T constant.
    cost = [e - p_w * t for (t, e) in columns] + [0.0] * n
    lower = [0.0] * (nx + n)
    upper = [1.0] * nx + [deadline_s] * n
    rows_lo, rows_hi, starts, index, value = [], [], [0], [], []

    def add_row(lo, hi, entries):
        rows_lo.append(lo)
        rows_hi.append(hi)
        for (i, v) in entries:
            index.append(i)
            value.append(v)
        starts.append(len(index))

    for v in range(n):  # one option each
        add_row(1.0, 1.0, [(k, 1.0) for k in range(first[v], first[v + 1])])
    for v in range(n):  # finishes by the deadline: s_v + d_v <= T
        add_row(-highspy.kHighsInf, deadline_s, [(nx + v, 1.0)] + [(k, columns[k][0]) for k in range(first[v], first[v + 1])])
    for (a, b) in edges:  # s_b - s_a - d_a >= 0
        add_row(0.0, highspy.kHighsInf, [(nx + b, 1.0), (nx + a, -1.0)] + [(k, -columns[k][0]) for k in range(first[a], first[a + 1])])
    lp = highspy.HighsLp()
    lp.num_col_ = nx + n
    lp.num_row_ = len(rows_lo)
    lp.col_cost_ = np.array(cost)
    lp.col_lower_ = np.array(lower)
    lp.col_upper_ = np.array(upper)
    lp.row_lower_ = np.array(rows_lo)
    lp.row_upper_ = np.array(rows_hi)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.array(starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.array(value)
    lp.integrality_ = [highspy.HighsVarType.kContinuous if relax else highspy.HighsVarType.kInteger] * nx + \
        [highspy.HighsVarType.kContinuous] * n
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit_s))
    h.setOptionValue("mip_rel_gap", float(rel_gap))
    h.setOptionValue("threads", 1)
    h.passModel(lp)
    h.run()
    info = h.getInfo()
    constant = p_w * stages * deadline_s
    status = h.modelStatusToString(h.getModelStatus())
    plan = None
    if relax:
        return info.objective_function_value + constant, info.objective_function_value + constant, 0.0, status, None
    if info.primal_solution_status == 2:  # feasible
        x = h.getSolution().col_value
        plan = [columns[max(range(first[v], first[v + 1]), key=lambda k: x[k])] for v in range(n)]
    return info.objective_function_value + constant, info.mip_dual_bound + constant, info.mip_gap, status, plan


def our_frontier(kareus, args, setting):
    rounds, _, unit = setting.partition("@")
    cmd = [kareus, "frontier", "--profile", args.profile, "--stages", str(args.stages), "--microbatches",
           str(args.microbatches), "--p-blocking", str(args.p_blocking), "--schedule", args.schedule,
           "--unit-time", unit or str(args.unit_time), "--csv"] + (["--bound"] if args.relaxation else [])
    if rounds == "converged":
        cmd += ["--local-search-budget", "1e15"]
    elif rounds != "default":
        cmd += ["--local-search-rounds", rounds]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    # time_s, energy_j, and with --relaxation bound_j: the least energy kareus says any plan of that time can spend
    columns = (0, 1, 4) if args.relaxation else (0, 1)
    return [tuple(float(line.split(",")[i]) for i in columns) for line in out.strip().split("\n")[1:]]


def check_relaxation(args, nodes, edges, options, front, fastest, slowest):
    """Our bound against HiGHS's linear relaxation, at the times of the front's plans nearest below 20 deadlines."""
    print("plan_time_s,energy_j,lp_j,bound_j,bound_vs_lp,plan_vs_bound")
    worst = worst_plan = 0.0
    for i in range(args.deadlines):
        deadline = (fastest + (slowest - fastest) * i / (args.deadlines - 1)) * (1 + 1e-9)
        t, e, bound = min(((t, e, b) for (t, e, b) in front if t <= deadline), key=lambda p: p[1])
        # The CSV's nine digits may put a time a hair below the plan's own: no plan fits it.
        lp = solve_deadline(nodes, edges, options, args.stages, args.p_blocking, t * (1 + 1e-9), args.time_limit, 0,
                            relax=True)[0]
        worst, worst_plan = max(worst, abs(bound - lp) / lp), max(worst_plan, e / bound - 1)
        print(f"{t:.9f},{e:.6f},{lp:.6f},{bound:.6f},{(bound - lp) / lp:.2e},{e / bound - 1:.5%}", flush=True)
    print(f"bound against HiGHS's relaxation: worst relative difference {worst:.2e}; worst plan {worst_plan:.5%} above it")
    return 0 if worst <= 1e-6 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", required=True)
    ap.add_argument("--stages", type=int, required=True)
    ap.add_argument("--microbatches", type=int, required=True)
    ap.add_argument("--p-blocking", type=float, required=True)
    ap.add_argument("--schedule", default="1f1b", choices=["1f1b", "gpipe"])
    ap.add_argument("--unit-time", default="auto", help="kareus frontier's --unit-time (default: its own, auto)")
    ap.add_argument("--local-search-rounds", default="default",
                    help="comma-separated local search settings, one front each: default (the CLI's), "
                         "a number of rounds (at the default budget), or converged (no budget); "
                         "SETTING@UNIT runs that front at another --unit-time")
    ap.add_argument("--kareus", default="build/kareus")
    ap.add_argument("--deadlines", type=int, default=20)
    ap.add_argument("--time-limit", type=float, default=60.0, help="HiGHS time limit per deadline, s")
    ap.add_argument("--mip-gap", type=float, default=1e-5, help="HiGHS relative MIP gap to stop at")
    ap.add_argument("--max-gap", type=float, default=1e-3, help="fail (exit 1) when our gap is above this")
    ap.add_argument("--relaxation", action="store_true",
                    help="instead of the MIP, solve its linear relaxation by HiGHS at the time of the front's plan "
                         "at each deadline and compare it with kareus frontier --bound's bound_j there (they are "
                         "the same optimum; fail above a relative 1e-6)")
    ap.add_argument("--dump-plans", metavar="FILE",
                    help="write HiGHS's plan at each deadline (JSON: per instruction stage, type, microbatch, "
                         "time_s, energy_j) to compare with kareus frontier --out's plans.json")
    args = ap.parse_args()

    options = read_profile(args.profile, args.stages)
    nodes, edges = dependencies(stage_orders(args.schedule, args.stages, args.microbatches))
    budgets = args.local_search_rounds.split(",")
    fronts = [our_frontier(args.kareus, args, rounds) for rounds in budgets]
    fastest, slowest = fronts[0][0][0], fronts[0][-1][0]
    print(f"{args.profile}: {args.stages} stages, {args.microbatches} microbatches, P {args.p_blocking} W; "
          f"{len(nodes)} instructions, {sum(len(options[(s, t)]) for (s, t, _) in nodes)} binaries; "
          f"our front {len(fronts[0])} plans, {fastest:.6f}..{slowest:.6f} s; HiGHS {args.time_limit} s per "
          f"deadline, stopping at a relative MIP gap of {args.mip_gap}")
    print("deadline_s,mip_j,mip_bound_j,highs_mip_gap,status,solve_s," +
          ",".join(f"ours_j[{r}],gap_to_mip[{r}],gap_to_bound[{r}]" for r in budgets))
    worst = [0.0] * len(budgets)
    worst_bound = [0.0] * len(budgets)
    worst_mip_gap = 0.0
    dumped = []
    if args.relaxation:
        return check_relaxation(args, nodes, edges, options, fronts[0], fastest, slowest)
    for i in range(args.deadlines):
        # Our CSV prints nine digits: the fastest plan's time may read a hair below its own.
        deadline = (fastest + (slowest - fastest) * i / (args.deadlines - 1)) * (1 + 1e-9)
        start = time.monotonic()
        mip, bound, mip_gap, status, plan = solve_deadline(nodes, edges, options, args.stages, args.p_blocking,
                                                           deadline, args.time_limit, args.mip_gap)
        if plan is not None:
            dumped.append({"deadline_s": deadline, "energy_j": mip, "instructions": [
                {"stage": s, "type": t, "microbatch": m, "time_s": c[0], "energy_j": c[1]}
                for (s, t, m), c in zip(nodes, plan)]})
        took = time.monotonic() - start
        worst_mip_gap = max(worst_mip_gap, mip_gap)
        cells = []
        for j, front in enumerate(fronts):
            ours = min(e for (t, e) in front if t <= deadline * (1 + 1e-9))
            gap, gap_bound = (ours - mip) / mip, (ours - bound) / bound
            worst[j], worst_bound[j] = max(worst[j], gap), max(worst_bound[j], gap_bound)
            cells.append(f"{ours:.6f},{gap:.5%},{gap_bound:.5%}")
        print(f"{deadline:.6f},{mip:.6f},{bound:.6f},{mip_gap:.2e},{status},{took:.1f}," + ",".join(cells), flush=True)
    if args.dump_plans:
        with open(args.dump_plans, "w") as f:
            json.dump(dumped, f, indent=1)
    for j, rounds in enumerate(budgets):
        print(f"local search budget {rounds}: worst gap to the MIP's plans {worst[j]:.5%}, to its dual bounds "
              f"{worst_bound[j]:.5%}; HiGHS's worst own MIP gap {worst_mip_gap:.3%}")
    return 0 if max(worst) <= args.max_gap else 1


if __name__ == "__main__":
    sys.exit(main())
