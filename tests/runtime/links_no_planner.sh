#!/usr/bin/env bash
# The runtime's shared libraries (the C library, the Python module) carry no planner: a training
# job links the plan format, the cursor and the devices, not the frontier solver, the search or
# compose. Checked on their symbol tables; the `kareus` tool, which has them all, shows that the
# pattern finds them.
# Usage: links_no_planner.sh KAREUS LIBRARY...
set -euo pipefail
kareus=$1
shift
planner='kareus::pipeline::(FrontierSolver|solve_frontier|MinCut)|kareus::search::(run_search|GaussianProcess)|kareus::compose::compose_option_table'
symbols() { nm -C --defined-only "$1" | grep -E "$planner" || true; }
[ -n "$(symbols "$kareus")" ] || { echo "the pattern finds no planner symbol even in $kareus"; exit 1; }
for library in "$@"; do
  found=$(symbols "$library")
  if [ -n "$found" ]; then
    echo "$library links the planner:"; echo "$found" | head -5; exit 1
  fi
  echo "ok: $(basename "$library") has no planner symbol"
done
