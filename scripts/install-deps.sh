#!/usr/bin/env bash
# Installs the Debian packages Kareus needs to build and test. Idempotent: quiet when all are present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libboost-graph-dev libeigen3-dev libnlopt-cxx-dev nlohmann-json3-dev libyaml-cpp-dev
  libcli11-dev libspdlog-dev libfmt-dev libtbb-dev
  libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev librapidcheck-dev libbenchmark-dev
  pybind11-dev python3-dev python3-pytest python3-venv python3-pip
  gnuplot-nox
  chromium  # headless, for the report's test (tests/report) and scripts/report-screenshot.sh
  clang libclang-rt-dev  # libFuzzer and the sanitizers' runtimes, for make fuzz (docs/testing.md)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
