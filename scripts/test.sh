#!/usr/bin/env bash
# Builds flare and runs the whole test suite four times: a plain build
# (warnings are errors), AddressSanitizer + UndefinedBehaviorSanitizer,
# ThreadSanitizer, and the plain build again while a load generator
# (stress-ng) keeps every core busy, so no test may count on a thread being
# scheduled soon (docs/RELIABILITY.md); each in its own build directory;
# then, when clang is
# installed, runs the libFuzzer targets for a bounded time (ctest -L fuzz,
# FLARE_FUZZ_SECONDS each, default 20; three targets: docs/RELIABILITY.md).
# Usage: scripts/test.sh [plain|asan|tsan|stress|fuzz ...]   (default: all five)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
variants=("$@")
[ ${#variants[@]} -eq 0 ] && variants=(plain asan tsan stress fuzz)
jobs=$(nproc)
# The stress variant's load generator, stopped however the script ends
# (a failed test, Ctrl-C, a kill).
load_pid=""
stop_load() {
  if [ -n "$load_pid" ]; then
    kill "$load_pid" 2>/dev/null || true
    wait "$load_pid" 2>/dev/null || true
    load_pid=""
  fi
}
trap stop_load EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
for variant in "${variants[@]}"; do
  if [ "$variant" = fuzz ]; then
    # libFuzzer comes with clang only; the fuzz build compiles the fuzz
    # targets alone, with the instrumented copy of the library they link
    # (the tests above already cover the rest).
    if ! command -v clang >/dev/null 2>&1; then
      echo "== fuzz: skipped: clang is not installed"
      continue
    fi
    build="build/test-fuzz"
    echo "== fuzz: building in $build"
    CC=clang cmake -S . -B "$build" -DFLARE_FUZZ=ON -DFLARE_BUILD_TESTS=OFF \
          -DFLARE_BUILD_BENCH=OFF -DFLARE_WERROR=ON \
          -DFLARE_FUZZ_SECONDS="${FLARE_FUZZ_SECONDS:-20}" >/dev/null
    cmake --build "$build" -j"$jobs" --target fuzz_all
    echo "== fuzz: fuzzing"
    ctest --test-dir "$build" -L fuzz --output-on-failure
    continue
  fi
  case "$variant" in
    plain) sanitize="" ; type=RelWithDebInfo ;;
    asan)  sanitize="address,undefined" ; type=Debug ;;
    tsan)  sanitize="thread" ; type=RelWithDebInfo ;;
    stress) sanitize="" ; type=RelWithDebInfo ;;
    *) echo "scripts/test.sh: unknown variant '$variant' (plain, asan, tsan, stress, fuzz)" >&2; exit 2 ;;
  esac
  build="build/test-$variant"
  echo "== $variant: building in $build"
  # The Python tests run under Debian's interpreter when it has the packages
  # scripts/install-deps.sh installs (pandas, dask, distributed): another
  # python3 first in PATH (pyenv) would skip the pandas and Dask tests.
  python_args=()
  if /usr/bin/python3 -c "import pandas, dask, distributed" 2>/dev/null; then
    python_args=(-DPython3_EXECUTABLE=/usr/bin/python3)
  fi
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="$type" -DFLARE_SANITIZE="$sanitize" \
        -DFLARE_WERROR=ON "${python_args[@]}" >/dev/null
  cmake --build "$build" -j"$jobs"
  echo "== $variant: testing"
  runner=()
  if [ "$variant" = tsan ]; then
    # ThreadSanitizer cannot map its shadow memory under the high ASLR
    # entropy of recent kernels; run the tests without randomisation.
    runner=(setarch "$(uname -m)" -R)
    export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
  fi
  if [ "$variant" = asan ]; then
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  fi
  if [ "$variant" = stress ]; then
    # One CPU hog per core for as long as the suite runs (the timeout only
    # bounds a hog orphaned by a kill -9 of this script).
    echo "== stress: stress-ng --cpu $jobs --cpu-method matrixprod keeps every core busy"
    stress-ng --cpu "$jobs" --cpu-method matrixprod --timeout 1800s --quiet &
    load_pid=$!
  fi
  "${runner[@]}" ctest --test-dir "$build" --output-on-failure -j2 --timeout 300
  stop_load
done
