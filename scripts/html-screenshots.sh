#!/usr/bin/env bash
# Regenerates docs/images/html-report-SECTION.png, one screenshot per section
# of `flare report --html`.
#
#   scripts/html-screenshots.sh [BUILD_DIR]
#       from a demo session: the synthetic session of bench/bench_html.c
#       (`bench_html --session DIR 200000`: 200,000 kernels on 2 devices in
#       100 training steps, NVML gauges, a deep window with PM samples, a
#       launch storm, kernel and range replay with speed-of-light metrics),
#       because a session of the simulated device has no NVML gauges and no
#       hardware metric values to show. Default BUILD_DIR: build/release.
#   scripts/html-screenshots.sh --page PAGE.html SECTION...
#       the named sections of a page already written, e.g. the H200 pages
#       `scripts/gpu-check.sh views` brings back (train.html: a traced PyTorch
#       loop with a deep window; span.html: a range replay of a PyTorch step).
#
# Needs chromium (scripts/install-deps.sh installs it). Each section is
# opened alone (report.html?section=ID), its height read from the page
# (<body data-page-height>), and shot 1280 pixels wide.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
page=""
sections=(session timeline kernels scopes pm replay drops)
if [ "${1:-}" = --page ]; then
  page="$(realpath "$2")"
  shift 2
  sections=("$@")
fi
build="${1:-build/release}"
chromium="${FLARE_CHROMIUM:-chromium}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [ -n "$page" ]; then
  cp "$page" "$work/report.html"
else
  # A build directory that exists keeps its configuration.
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DFLARE_BUILD_BENCH=ON >/dev/null
  fi
  cmake --build "$build" -j"$(nproc)" --target flare_cli bench_html >/dev/null
  "$build/bench/bench_html" --session "$work/session" 200000
  "$build/bin/flare" report --html "$work/report.html" "$work/session"
fi
browser=("$chromium" --headless --no-sandbox --disable-gpu --no-first-run --disable-extensions
  --hide-scrollbars --user-data-dir="$work/profile" --virtual-time-budget=10000)
mkdir -p docs/images
for section in "${sections[@]}"; do
  url="file://$work/report.html?section=$section"
  dom="$("${browser[@]}" --window-size=1280,400 --dump-dom "$url" 2>/dev/null)"
  if ! grep -q 'data-rendered="ok"' <<<"$dom"; then
    echo "html-screenshots: section $section did not draw" >&2
    exit 1
  fi
  height="$(grep -o 'data-page-height="[0-9]*"' <<<"$dom" | grep -o '[0-9]*' | head -1)"
  height=$(( height < 300 ? 300 : height > 4000 ? 4000 : height ))
  "${browser[@]}" --window-size="1280,$height" --screenshot="docs/images/html-report-$section.png" \
    "$url" 2>/dev/null
  echo "docs/images/html-report-$section.png (1280x$height)"
done
