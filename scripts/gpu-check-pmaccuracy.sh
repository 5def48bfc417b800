# gpu-check-pmaccuracy.sh: part "pmaccuracy" of scripts/gpu-check.sh (sourced
# there; uses its $flare, $build, $work, $OUT and fail; must not exit). How
# accurate per-kernel totals integrated from PM samples are against the range
# profiler's exact values (issue 25, item 1): builds tests/gpu/pm_accuracy.cu
# (memory- and compute-bound kernels of about 5 us to 5 ms in NVTX "step"
# ranges) and runs tests/gpu/pm_accuracy.py, which traces it under one
# scheduled deep window per run at each PM interval (FLARE_PM_ACCURACY_INTERVALS,
# default 10us,20us,50us,100us; FLARE_PM_ACCURACY_RUNS runs each, default 2),
# replays one step with the range profiler, and prints per kernel and interval
# the PM estimate, the reference and the error, per-window diagnostics and a
# summary. About 1.5 min on the H200; bounded at 300 s. Its output goes to
# $OUT/pm-accuracy.txt; the sessions stay in $work/pm-accuracy, never in $OUT.
echo "== pmaccuracy: PM samples integrated per kernel against the range profiler"
rm -f "$build/gpu/pm_accuracy"
nvcc -O2 -arch=sm_90 -lineinfo -I/usr/local/cuda/include -o "$build/gpu/pm_accuracy" tests/gpu/pm_accuracy.cu -ldl \
  || fail "nvcc pm_accuracy"
# The analysis first, on a synthetic session (integration and edges, no GPU).
python3 tests/gpu/pm_accuracy.py --self-test > "$work/pm-accuracy-self-test.txt" 2>&1 ||
  { tail -20 "$work/pm-accuracy-self-test.txt"; fail "pmaccuracy: self-test of the analysis"; }
if [ -x "$build/gpu/pm_accuracy" ]; then
  PYTHONUNBUFFERED=1 timeout -k 10 300 python3 tests/gpu/pm_accuracy.py "$flare" "$build/gpu" "$work/pm-accuracy" \
    --intervals "${FLARE_PM_ACCURACY_INTERVALS:-10us,20us,50us,100us}" --runs "${FLARE_PM_ACCURACY_RUNS:-2}" \
    2>&1 | tee "$OUT/pm-accuracy.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "pmaccuracy: a run failed or data is missing (tests/gpu/pm_accuracy.py)"
fi
