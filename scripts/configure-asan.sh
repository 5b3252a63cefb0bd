#!/usr/bin/env bash
# Configures the sanitizer build directory (default build-asan) that `make sanitize` and `make fuzz`
# share: with clang, every library carries libFuzzer's coverage beside ASan and UBSan, so the fuzz
# targets and the ASan + UBSan tests are one build; without clang, GCC's ASan + UBSan for the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-asan}
common=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DKAREUS_BUILD_TESTS=ON -DKAREUS_BUILD_BENCH=OFF -DKAREUS_CUDA=OFF)
if command -v clang++ >/dev/null; then
  cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DKAREUS_FUZZ=ON \
    -DKAREUS_WERROR=OFF "${common[@]}" >/dev/null
else
  cmake -S . -B "$build" -DKAREUS_WERROR=ON "${common[@]}" \
    -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
    -DCMAKE_C_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer" >/dev/null
fi
