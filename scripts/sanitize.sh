#!/usr/bin/env bash
# The sanitizer suites (docs/testing.md):
# - ASan + UBSan (build-asan, scripts/configure-asan.sh): the tests of core, pipeline (the solver),
#   runtime and cli (which run the sanitized `kareus`), and every fuzz target over its seeds and
#   regressions; any report fails the test that gave it.
# - TSan (build-tsan): the solver's two-thread frontier, the runtime's per-GPU workers and the
#   planner's methods side by side, the tests that run them on several threads.
# SANITIZE_QUICK=1 (what CI runs) leaves out of the ASan suite the few tests that take over a minute
# under ASan (each plans a whole job with the sanitized `kareus`; docs/testing.md lists them).
#   SANITIZE="asan tsan" JOBS=2 scripts/sanitize.sh
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
asan=${ASAN_BUILD:-build-asan}
tsan=${TSAN_BUILD:-build-tsan}
suites=(${SANITIZE:-asan tsan})
# Over 40 s each under ASan on 2 cores (docs/testing.md); what they check runs unsanitized in make test.
slow_under_asan='^(RealPlanCursor\.|ScheduleCli\.(PlanWritesAnInterleavedPlan|CompareReportsTheWholeJob|ComparePlansZeroBubble|AZeroBubbleStageTable|ExportsCarryWhatEachGrammar|PlanCompareAndFrontierAccept)|JournalCli\.ASearchsJournalsResumeUnderPlan|PlanConsumers\.EveryConsumerRefuses|ReportCli\.PlanAndCompareDraw|PlanCli\.(TheBaselinesAndSavings|TargetsPickTheirPoint|TheReportDrawsThePartition|NoRelaxationPlansSolves)|HwCli\.CheckPlans(NamesItsEngine|PrintsEveryPlan)|FrontierCli\.(ReadsTheComposedTable|BoundsThePlansFront)|CompareCli\.FourMethodsAndKareusIsNeverWorse|ReplayCli\.AStragglersSlowdown)'
skip=()
if [ "${SANITIZE_QUICK:-0}" = 1 ]; then skip=(-E "$slow_under_asan"); fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

for suite in "${suites[@]}"; do
  start=$SECONDS
  case $suite in
    asan)
      bash scripts/configure-asan.sh "$asan"
      cmake --build "$asan" -j"$jobs" --target kareus core_test schedule_test interop_test pipeline_test runtime_test cli_test fuzz_targets >/dev/null
      ctest --test-dir "$asan" --output-on-failure -j"$jobs" -L '^(core|schedule|interop|pipeline|runtime|cli|fuzz)$' "${skip[@]}"
      ;;
    tsan)
      cmake -S . -B "$tsan" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKAREUS_WERROR=OFF -DKAREUS_BUILD_BENCH=OFF \
        -DKAREUS_CUDA=OFF -DCMAKE_CXX_FLAGS="-fsanitize=thread" -DCMAKE_C_FLAGS="-fsanitize=thread" >/dev/null
      # runtime_test without the `kareus` binary its other tests run (Makefiles' target/fast: no deps).
      cmake --build "$tsan" -j"$jobs" --target pipeline_test kareus_runtime kareus_planner >/dev/null
      make -C "$tsan" -j"$jobs" runtime_test/fast planner_test/fast >/dev/null
      "$tsan"/tests/pipeline_test --gtest_filter='FrontierSolver.SolveFrontier*:PerseusData.FrontIsTheSameOnOneThreadAsOnFour'
      "$tsan"/tests/runtime_test --gtest_filter='FrequencyController.*:EnergyMonitor.*:PlanCursor*.*'
      # The methods side by side, each searching and solving on threads of its own.
      "$tsan"/tests/planner_test --gtest_filter='Comparison.MethodsRunSideBySide*'
      ;;
    *) echo "sanitize: unknown suite '$suite' (asan, tsan)" >&2; exit 2 ;;
  esac
  echo "sanitize: $suite passed in $((SECONDS - start)) s"
done
