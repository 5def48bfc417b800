# gpu-check-auto.sh: part "auto" of scripts/gpu-check.sh (sourced there; uses
# its $flare, $build, $work, $OUT and fail; it must not exit). Engine auto on
# the GPU (issue 26, docs/windows.md "Engine auto"): three runs, each checked
# in its session database by tests/gpu/check_auto.py.
#   1. pc_hot_loop (about 200 launches/s) with --deep-engine auto, the default
#      deep budget (5%): PC sampling is enabled at the first context, and the
#      window runs PC sampling, its engine_reason "auto: pc, ...", with samples.
#   2. The same with --deep-budget 0.5%: PC sampling's nominal estimate (0.98%
#      at 10,000 launches/s) is over it, so PC sampling stays off, and the
#      window runs PM sampling ("auto: pm, ..."), with samples.
#   3. launch_storm (about 250,000 launches/s) with --deep-engine auto: no
#      engine fits 5% at that rate, so the window is refused ("auto: no
#      engine fits ...") and nothing is armed; the program exits 0.
# Output goes to $OUT/auto.txt; the sessions stay in $work. Must never change
# the build or the environment of the parts sourced after it.
# $flare, $build, $work and $OUT are gpu-check.sh's:
# shellcheck shell=bash disable=SC2154
echo "== auto: engine auto picks within the deep budget (pc, pm, refused)"
auto_out="$OUT/auto.txt"
: > "$auto_out"
mkdir -p "$build/gpu"
python3 tests/gpu/check_auto.py --self-test >> "$auto_out" 2>&1 ||
  fail "auto: self-test of tests/gpu/check_auto.py"

# auto_run EXPECT SESSION FLARE_TRACE_ARGS...: the run, its report's windows and
# the check; a failure of either is a fail.
auto_run() {
  local expect=$1 session=$2
  shift 2
  rm -rf "$session"
  echo "-- flare trace $* (expect $expect)" | tee -a "$auto_out"
  timeout 120 "$flare" trace -q -o "$session" "$@" >> "$auto_out" 2>&1 ||
    fail "auto: flare trace $* exited $?"
  "$flare" report "$session" 2>&1 | grep -A4 "^Deep-profiling windows" | tee -a "$auto_out"
  python3 tests/gpu/check_auto.py "$session" "$expect" 2>&1 | tee -a "$auto_out"
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "auto: expected $expect ($*): tests/gpu/check_auto.py"
}

if [ ! -x "$build/gpu/pc_hot_loop" ]; then
  nvcc -O2 -lineinfo -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/pc_hot_loop" \
    tests/gpu/pc_hot_loop.cu -ldl || fail "auto: nvcc pc_hot_loop"
fi
if [ ! -x "$build/gpu/launch_storm" ]; then
  nvcc -O2 -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/launch_storm" \
    tests/gpu/launch_storm.cu -ldl || fail "auto: nvcc launch_storm"
fi
auto_run pc "$work/auto-pc" --deep-engine auto --deep-after 1500ms --deep-for 500ms -- \
  "$build/gpu/pc_hot_loop" 4
auto_run pm "$work/auto-pm" --deep-engine auto --deep-budget 0.5% --deep-after 1500ms \
  --deep-for 500ms -- "$build/gpu/pc_hot_loop" 4
auto_run refused "$work/auto-storm" --deep-engine auto --deep-after 1200ms --deep-for 300ms -- \
  "$build/gpu/launch_storm" 400000
unset -f auto_run
