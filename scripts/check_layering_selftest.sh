#!/usr/bin/env bash
# The layering check fails where it should: on a copy of the tree whose runtime links the solver
# (kareus_pipeline), and on one whose plan format includes a later module's header.
# Usage: check_layering_selftest.sh ROOT
set -euo pipefail
root=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
copy() { rm -rf "$work/t"; mkdir -p "$work/t"; cp "$root/CMakeLists.txt" "$work/t/"; cp -r "$root/src" "$work/t/"; }
expect_failure() {  # what, pattern
  if out=$(python3 "$root/scripts/check_layering.py" "$work/t"); then echo "not caught: $1"; exit 1; fi
  grep -q "$2" <<<"$out" || { echo "caught $1 without naming it:"; echo "$out"; exit 1; }
  echo "caught: $1"
}
copy
python3 "$root/scripts/check_layering.py" "$work/t" >/dev/null || { echo "the unchanged copy fails"; exit 1; }
sed -i 's/DEPS kareus_plan /DEPS kareus_pipeline kareus_plan /' "$work/t/src/kareus/runtime/CMakeLists.txt"
expect_failure "a runtime that links the solver" "the runtime reaches pipeline"
copy
echo '#include "kareus/planner/planner.hpp"' >>"$work/t/src/kareus/plan/plan.cpp"
expect_failure "a plan format that includes the planner" "plan includes planner, which comes after it"
