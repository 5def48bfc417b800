#!/usr/bin/env bash
# The main job: build flare, profile the bundled demo under `flare trace`
# (on the simulated device when there is no GPU), and print the report.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build=build/release
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DFLARE_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
session="flare-out/demo-$(date -u +%Y%m%dT%H%M%SZ)-$$"
"$build/bin/flare" trace -o "$session" -- "$build/bin/flare-demo" "$@"
echo
"$build/bin/flare" report "$session"
