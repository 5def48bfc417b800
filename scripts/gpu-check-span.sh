# gpu-check-span.sh: range replay on a real GPU, sourced by scripts/gpu-check.sh
# (`span` or `all`), which provides $flare, $build, $work, $OUT and fail().
#
# Two workloads with NVTX step ranges: tests/gpu/span_steps.cu (three integer
# kernels, a copy and a memset per step) and tests/gpu/train_step.py (a small
# PyTorch MLP: forward, backward, Adam). Each runs unprofiled, under
# `flare replay --range step --set speed-of-light`, and under ncu restricted
# to the same step (--nvtx-include step/) and to nothing (to subtract ncu's
# own start-up). tests/gpu/check_span.py judges; numbers land in
# $OUT/span-summary.json. Never touches anything outside $work and $OUT.

echo "== range replay"
# Until PM sampling steps aside for replay by itself, keep it off here: it would
# hold the counters the range profiler needs (CUPTI_ERROR_HARDWARE_BUSY).
export FLARE_PM=0
command -v ncu >/dev/null || export PATH="$PATH:/usr/local/cuda/bin"
span_dir="$work/span"
rm -rf "$span_dir"
mkdir -p "$span_dir"
nvcc -O2 -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/span_steps" tests/gpu/span_steps.cu -ldl \
  || fail "nvcc span_steps"
# The bare-CUPTI floor probe (built here too when the replay part did not run).
[ -x "$build/gpu/replay_baselines" ] || build_replay_baselines
sol=$("$flare" replay --list-sets | awk '/^  [a-z]/ {inside = ($1 == "speed-of-light")} inside && /__/ {print $1}' | paste -sd, -)
echo "speed-of-light: $sol"
export CUBLAS_WORKSPACE_CONFIG=:4096:8
span_timed() { # span_timed NAME CMD...: stdout NAME.json, stderr NAME.err, times NAME.wall
  local name=$1; shift
  local t0=$EPOCHREALTIME
  timeout "${span_timeout:-240}" "$@" > "$span_dir/$name.json" 2> "$span_dir/$name.err"
  local rc=$?
  echo "$t0 $EPOCHREALTIME" > "$span_dir/$name.wall"
  tail -3 "$span_dir/$name.err"
  [ $rc -eq 0 ] || fail "$name exited $rc"
}
ncu_span=(ncu --nvtx --replay-mode kernel --cache-control none --clock-control none
  --print-units base --csv --metrics "$sol")
# The first process to use the GPU's profiler after the machine starts pays
# about 450 ms more in its first cuptiRangeProfilerStart: one untimed run
# takes it, so neither tool's timed runs carry it.
"$flare" replay -q -o "$span_dir/warm-up" --range step --metrics gpu__time_duration.sum \
  -- "$build/gpu/span_steps" --footprint-mib 64 --steps 3 --mark 2 >/dev/null 2>&1 ||
  fail "profiler warm-up run"
for workload in c torch; do
  if [ "$workload" = c ]; then
    program=("$build/gpu/span_steps" --footprint-mib 256 --steps 5 --mark 3)
  else
    program=(python3 tests/gpu/train_step.py --steps 6 --mark 4)
  fi
  echo "-- $workload: unprofiled, flare replay --range step, ncu on the step, ncu on nothing"
  span_timed "$workload-plain" "${program[@]}"
  span_timeout=120 span_timed "$workload-flare" "$flare" replay -q -o "$span_dir/$workload-flare" \
    --range step --set speed-of-light -- "${program[@]}"
  "$flare" report "$span_dir/$workload-flare" > "$span_dir/$workload-report.txt" 2>&1
  grep -A12 "Range replay" "$span_dir/$workload-report.txt" | cut -c1-160 | head -14
  grep -E "range replay|range profiler" "$span_dir/$workload-flare/flare.log" | cut -c1-400
  if ! grep -q '"checksum"' "$span_dir/$workload-flare.json"; then
    echo "-- $workload: no result under flare; ncu skipped"
    continue
  fi
  # ncu's NVTX filter follows push/pop ranges per thread, so it misses the
  # step's backward kernels, which PyTorch launches from its autograd
  # threads; flare's span holds every thread's work on the device. ncu gets
  # the step as a launch range instead: flare logs how many kernels the
  # program had launched when the span began (counted at the launch call,
  # as ncu counts; GPU timestamps are too far off the host clock to tell).
  skip=$(sed -n 's/.*range replay: span .* after \([0-9]*\) kernel launches by the program.*/\1/p' \
    "$span_dir/$workload-flare/flare.log" | head -1)
  count=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT kernels FROM replay_spans LIMIT 1').fetchone()[0])" \
    "$span_dir/$workload-flare/session.db")
  if [ -z "$skip" ] || [ -z "$count" ]; then
    fail "$workload: no launch count for the span in flare.log"
    continue
  fi
  echo "-- $workload: ncu on launches $((skip + 1)) to $((skip + count)) (the span's)"
  span_timed "$workload-ncu" "${ncu_span[@]}" --launch-skip "$skip" --launch-count "$count" \
    --log-file "$span_dir/$workload-ncu.csv" "${program[@]}"
  span_timed "$workload-ncu-off" "${ncu_span[@]}" --nvtx-include "nostep/" \
    --log-file "$span_dir/$workload-ncu-off.csv" "${program[@]}"
  # The floor under any tool built on the range profiler: bare CUPTI (user
  # replay, automatic ranges) over as many short kernels, nothing else in
  # the process; its first collection is what one span's collection pays.
  echo "-- $workload: bare CUPTI range profiler over $count kernels (the floor)"
  span_timed "$workload-floor" "$build/gpu/replay_baselines" range-floor "$sol" "$count" 1 none
done
python3 tests/gpu/check_span.py "$span_dir" "$OUT/span-summary.json" || fail "range replay checks"
# flare's own sessions and logs of the replayed runs and ncu's tables, one
# archive (the device tool brings back few files).
tar -czf "$OUT/span-logs.tar.gz" -C "$span_dir" $(cd "$span_dir" && ls -d *-flare *-report.txt *.err *.csv *.json 2>/dev/null) 2>/dev/null
