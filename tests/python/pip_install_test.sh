#!/usr/bin/env bash
# `pip install .` from the repository root into a fresh virtual environment, then `import kareus`
# and a short fake-GPU loop through the installed package. Usage: pip_install_test.sh REPO PYTHON
set -euo pipefail
repo=$1
python=${2:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m venv "$work/venv"
# The C++ core builds as in the main build; ccache (where present) makes that quick.
if command -v ccache >/dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
fi
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
"$work/venv/bin/pip" install --quiet --disable-pip-version-check "$repo"
cd "$work"  # away from the source tree: the installed package must be the one imported
"$work/venv/bin/python" - <<'PY'
import kareus
assert "site-packages" in kareus.__file__, kareus.__file__
gpu = kareus.FakeGpu()
with kareus.FrequencyController([gpu]) as controller:
    controller.request_sm_clock(1005)
    controller.wait_idle()
    assert gpu.locked_sm_clock_mhz == 1005
assert gpu.locked_sm_clock_mhz is None
assert kareus.PipelineFrequencyOptimizer and kareus.ZeusMonitor
print("pip install . works:", kareus.__file__)
PY
