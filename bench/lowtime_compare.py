#!/usr/bin/env python3
"""Wall time of `kareus frontier` against lowtime 0.3.0 (Perseus's Phillips–Dessouky, with its Rust
min cut) on the same profile, pipeline and time unit, measured in the same run.

lowtime gets what Perseus gives it: one operation per instruction, with the profile's options,
cost = effective energy E − P·t and its exponential fit; source and sink dummies. Its solver is
timed from construction to the last iteration (fitting the cost models is timed apart). Kareus is
timed as a whole process, with Phillips–Dessouky alone (--local-search-rounds 0) and by default, and
with --converged also with the local search run to convergence (--local-search-budget 1e15).

Needs lowtime (PyPI), in a venv: python3 -m venv .venv && .venv/bin/pip install lowtime==0.3.0

  .venv/bin/python bench/lowtime_compare.py --profile data/perseus-sosp24/stage_profile/gpt3-175b+a100_sxm_bf16.csv \
      --stages 8 --microbatches 48 --p-blocking 83.64
"""
import argparse
import logging
import os
import subprocess
import sys
import time

import networkx as nx
from lowtime.cost_model import ExponentialModel
from lowtime.operation import CandidateExecutionOptions, DummyOperation, ExecutionOption, Operation, OperationSpec
from lowtime.solver import PhillipsDessouky

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mip_reference import dependencies, read_profile, stage_orders  # noqa: E402


def lowtime_seconds(args):
    options = read_profile(args.profile, args.stages)
    nodes, edges = dependencies(stage_orders(args.schedule, args.stages, args.microbatches))
    start = time.monotonic()
    specs = {}
    for key, opts in options.items():
        candidates = CandidateExecutionOptions(
            options=[ExecutionOption(real_time=t, unit_time=args.unit_time, cost=e - args.p_blocking * t, knob=k)
                     for k, (t, e) in enumerate(opts)])
        specs[key] = OperationSpec(options=candidates, cost_model=ExponentialModel(candidates))
    fit_s = time.monotonic() - start
    start = time.monotonic()
    dag = nx.DiGraph()
    source, sink = len(nodes), len(nodes) + 1
    for i, (s, t, _m) in enumerate(nodes):
        dag.add_node(i, op=Operation(spec=specs[(s, t)]))
    dag.add_node(source, op=DummyOperation())
    dag.add_node(sink, op=DummyOperation())
    dag.add_edges_from(edges)
    for i in range(len(nodes)):
        if dag.in_degree(i) == 0:
            dag.add_edge(source, i)
        if dag.out_degree(i) == 0:
            dag.add_edge(i, sink)
    dag.graph["source_node"], dag.graph["sink_node"] = source, sink
    iterations = sum(1 for _ in PhillipsDessouky(dag).run())
    return fit_s, time.monotonic() - start, iterations


def kareus_seconds(args, extra):
    cmd = [args.kareus, "frontier", "--profile", args.profile, "--stages", str(args.stages), "--microbatches",
           str(args.microbatches), "--p-blocking", str(args.p_blocking), "--schedule", args.schedule,
           "--unit-time", str(args.unit_time), "--csv"] + extra
    start = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", required=True)
    ap.add_argument("--stages", type=int, required=True)
    ap.add_argument("--microbatches", type=int, required=True)
    ap.add_argument("--p-blocking", type=float, required=True)
    ap.add_argument("--schedule", default="1f1b", choices=["1f1b", "gpipe"])
    ap.add_argument("--unit-time", type=float, default=1e-3)
    ap.add_argument("--kareus", default="build/kareus")
    ap.add_argument("--converged", action="store_true", help="also time the local search run to convergence")
    args = ap.parse_args()
    logging.disable(logging.CRITICAL)
    ours_pd = kareus_seconds(args, ["--local-search-rounds", "0"])
    ours = kareus_seconds(args, [])
    ours_converged = kareus_seconds(args, ["--local-search-budget", "1e15"]) if args.converged else None
    fit_s, lowtime_s, iterations = lowtime_seconds(args)
    converged = (f", run to convergence {ours_converged:.2f} s ({lowtime_s / ours_converged:.1f}x faster)"
                 if ours_converged is not None else "")
    print(f"{os.path.basename(args.profile)} S={args.stages} M={args.microbatches} unit={args.unit_time}: "
          f"lowtime {lowtime_s:.2f} s ({iterations} iterations; its fits {fit_s:.2f} s more), kareus "
          f"Phillips–Dessouky alone {ours_pd:.2f} s ({lowtime_s / ours_pd:.1f}x faster), with the default local "
          f"search {ours:.2f} s ({lowtime_s / ours:.1f}x faster){converged}")


if __name__ == "__main__":
    main()
