#!/usr/bin/env bash
# Regenerates docs/img/report.png, the README's picture: the real report of the default job
# (`kareus plan`, the README's `make run`) in headless Chromium, 1300 px wide, the whole page.
# Usage: scripts/report-screenshot.sh [KAREUS_BINARY]   (default: build/kareus)
# Needs Debian's chromium and gnuplot (scripts/install-deps.sh installs both).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kareus=${1:-$root/build/kareus}
[ -x "$kareus" ] || { echo "report-screenshot: no $kareus; build first (make) or name the binary" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$kareus" plan --out "$work/out" >/dev/null
python3 "$root/scripts/report_browser.py" check "$work/out/report.html" --width 1300
python3 "$root/scripts/report_browser.py" screenshot "$work/out/report.html" "$root/docs/img/report.png" --width 1300
