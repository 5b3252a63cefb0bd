#!/usr/bin/env bash
# Runs zeus_pfo_real.py with Zeus (PyPI `zeus`) in a virtual environment kept in VENV: zeus itself
# and only what its PFO scheduler module imports (pydantic, pandas, aiofiles; not its GPU monitors
# or the server's web stack). Exit 77 (a skip for CTest) when Zeus cannot be installed, e.g. offline.
# Usage: zeus_pfo_test.sh PYTHON VENV KAREUS_BINARY SCRATCH_DIR
set -euo pipefail
python=$1 venv=$2 kareus=$3 scratch=$4
here=$(cd "$(dirname "$0")" && pwd)
probe="import aiofiles, pandas, pydantic, zeus; assert zeus.__version__ == '0.16.0'"
if ! "$venv/bin/python" -c "$probe" 2>/dev/null; then
  rm -rf "$venv"
  if ! "$python" -m venv "$venv" ||
     ! "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps zeus==0.16.0 ||
     ! "$venv/bin/pip" install --quiet --disable-pip-version-check pydantic pandas aiofiles ||
     ! "$venv/bin/python" -c "$probe"; then
    echo "skipped: Zeus 0.16.0 could not be installed from PyPI into $venv"
    rm -rf "$venv"
    exit 77
  fi
fi
exec "$venv/bin/python" "$here/zeus_pfo_real.py" "$kareus" "$scratch"
