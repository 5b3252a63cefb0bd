#!/usr/bin/env bash
# Builds the fuzz targets of fuzz/ with clang (libFuzzer, ASan + UBSan) and runs each for
# FUZZ_SECONDS from its checked-in seeds (fuzz/corpus/<name>/) plus the corpus it grew before
# (<build>/corpus/<name>/). A crash, sanitizer report, hang (FUZZ_TIMEOUT per input) or broken
# error contract stops that target with its input in <build>/findings/; the script then fails.
# Skips, exit 0, where clang or its libFuzzer is missing (Debian: clang libclang-rt-dev).
# FUZZ_SEED fixes libFuzzer's seed (CI's run explores the same inputs each time); unset, it is random.
#   FUZZ_SECONDS=300 FUZZ_TARGETS="plan journal" scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-300}
timeout=${FUZZ_TIMEOUT:-10}
build=${ASAN_BUILD:-build-asan}
jobs=${JOBS:-$(nproc)}
seed=()
if [ -n "${FUZZ_SEED:-}" ]; then seed=(-seed="$FUZZ_SEED"); fi

if ! command -v clang++ >/dev/null ||
   ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
     clang++ -x c++ -fsanitize=fuzzer - -o /dev/null 2>/dev/null; then
  echo "fuzz: skipped: no clang++ with libFuzzer here (Debian: apt-get install clang libclang-rt-dev)"
  exit 0
fi
if [ "${FUZZ_SKIP_BUILD:-0}" != 1 ]; then  # 1: fuzz the targets already built, as they are
  bash scripts/configure-asan.sh "$build"
  cmake --build "$build" -j"$jobs" --target fuzz_targets >/dev/null
fi
# Every target fuzz/CMakeLists.txt builds, or those FUZZ_TARGETS names.
targets=(${FUZZ_TARGETS:-$(cd "$build/fuzz" && ls -1 fuzz_* | sed 's/^fuzz_//')})

mkdir -p "$build/findings"
status=0
printf '%-16s %10s %10s %8s %s\n' target executions exec/s corpus result
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t"
  log="$build/findings/$t.log"
  if "$build/fuzz/fuzz_$t" "${seed[@]}" -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=2048 -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="$build/findings/$t-" "$build/corpus/$t" "fuzz/corpus/$t" >"$log" 2>&1; then
    result=ok
  else
    result="FINDING (see $log)"
    status=1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  size=$(ls "$build/corpus/$t" | wc -l)
  printf '%-16s %10s %10s %8s %s\n' "$t" "${runs:-?}" "${rate:-?}" "$size" "$result"
done
exit $status
