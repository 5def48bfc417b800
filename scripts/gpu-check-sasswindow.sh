# gpu-check-sasswindow.sh: part "sasswindow" of scripts/gpu-check.sh (sourced there;
# uses its $flare, $build, $work, $OUT, fail and gpu_sql; it must not exit). flare's CUDA SASS
# metrics deep window (issue 26, item 2) on the known hot loop of tests/gpu/pc_hot_loop.cu,
# its launches shortened to 0.5 ms (PC_HOT_LOOP_MS: patched kernels run up to 465x
# slower), traced with one scheduled window that asks for sass (--deep-after 1500ms
# --deep-for 300ms --deep-engine sass). Prints `flare report` of the session and runs
# tests/gpu/sass_window_check.py on it (self-test first, no GPU), which fails unless the
# window ran the SASS engine, hot_chain's loop count is a whole number of launches
# (warps x iterations each), thread instructions are 32x, and the top line is the hot
# loop's, and the window's untimed launches are in the NVTX range "step", which the
# report's by-scope line then gives 100%. Then the failure path on the real CUPTI: FLARE_SASS_METRICS naming a metric
# that does not exist must refuse the window with CUPTI's words and end the run exit 0.
# Last, where PyTorch has CUDA, tests/gpu/pc_torch.py with one sass window: the run
# must end exit 0 with rows for the kernels that ran (shown, and the flush's size).
# A run still going after 40 s has its threads shown and is killed. Output goes to $OUT/sass-window.txt; the
# sessions stay in $work. Must never change the build or the environment of the parts
# sourced after it.
# $flare, $build, $work and $OUT are gpu-check.sh's:
# shellcheck shell=bash disable=SC2154
echo "== sasswindow: a SASS metrics deep window on a known hot loop (tests/gpu/pc_hot_loop.cu)"
sasswindow_out="$OUT/sass-window.txt"
: > "$sasswindow_out"
mkdir -p "$build/gpu"
python3 tests/gpu/sass_window_check.py --self-test > "$work/sass-window-self-test.txt" 2>&1 ||
  { tail -20 "$work/sass-window-self-test.txt"; fail "sasswindow: self-test of tests/gpu/sass_window_check.py"; }

# sasswindow_tree PID: PID and its descendants, one per line.
sasswindow_tree() {
  local child
  echo "$1"
  for child in $(pgrep -P "$1"); do
    sasswindow_tree "$child"
  done
}

# sasswindow_run ARGS...: flare trace ARGS in the background; after 40 s still running,
# every thread of it and its children is shown (name, state, wait channel, and gdb's
# backtraces where gdb is installed), then it is killed (status 124). CUPTI's calls are
# logged to $work/sass-calls.N (FLARE_CUDA_PC_LOG), shown after each run.
sasswindow_runs=0
sasswindow_run() {
  sasswindow_runs=$((sasswindow_runs + 1))
  local calls="$work/sass-calls.$sasswindow_runs" pid waited=0 task tid
  rm -f "$calls"
  FLARE_CUDA_PC_LOG="$calls" "$flare" trace "$@" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 400 ]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "   still running after 40 s: its threads"
    for tid in $(sasswindow_tree "$pid"); do
      [ -d "/proc/$tid" ] || continue
      echo "   process $tid: $(tr '\0' ' ' < "/proc/$tid/cmdline" | cut -c1-120)"
      for task in /proc/"$tid"/task/*; do
        echo "     thread ${task##*/} $(cat "$task/comm") state $(awk '{print $3}' "$task/stat")" \
          "wchan $(cat "$task/wchan" 2>/dev/null) syscall $(cut -d' ' -f1 "$task/syscall" 2>/dev/null)"
      done
      if command -v gdb > /dev/null; then
        timeout 60 gdb -p "$tid" -batch -ex "thread apply all bt 25" 2>&1 | grep -E "^Thread|^#" | cut -c1-160
      fi
    done
    echo "   CUPTI calls (last 20): "; tail -20 "$calls" 2>/dev/null
    # shellcheck disable=SC2046 # one pid per word
    kill -KILL $(sasswindow_tree "$pid") 2>/dev/null
    wait "$pid" 2>/dev/null
    return 124
  fi
  wait "$pid"
  local status=$?
  echo "   CUPTI calls: $(grep -c . "$calls" 2>/dev/null) lines; the SASS ones:"
  grep -i "sass\|CtxPush" "$calls" 2>/dev/null | head -40
  return "$status"
}

rm -f "$build/gpu/pc_hot_loop_sass"
if nvcc -O2 -lineinfo -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/pc_hot_loop_sass" \
     tests/gpu/pc_hot_loop.cu -ldl; then
  session="$work/sasswindow"
  rm -rf "$session"
  # The window lasts past the program's end: it is stopped at the program's
  # exit, on the exiting thread, before CUPTI's exit handlers (made after
  # them, the flush lost counts and the program crashed, session 19).
  echo "-- PC_HOT_LOOP_MS=0.5 flare trace --deep-after 1500ms --deep-for 30s --deep-engine sass" \
    "-- pc_hot_loop 3" | tee -a "$sasswindow_out"
  started=$(date +%s.%N)
  PC_HOT_LOOP_MS=0.5 sasswindow_run -q -o "$session" --deep-after 1500ms --deep-for 30s \
    --deep-engine sass -- "$build/gpu/pc_hot_loop_sass" 3 > "$work/sasswindow.stdout" 2>&1
  sasswindow_status=$?
  echo "   exit $sasswindow_status in $(awk -v s="$started" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}') s" |
    tee -a "$sasswindow_out"
  tee -a "$sasswindow_out" < "$work/sasswindow.stdout"
  echo "   the session's log (SASS lines):" | tee -a "$sasswindow_out"
  gpu_sql "$session/session.db" "SELECT level, message FROM log WHERE message LIKE '%SASS%' \
    OR message LIKE '%sass%'" 2>&1 | tail -20 | tee -a "$sasswindow_out"
  [ "$sasswindow_status" -eq 0 ] || fail "sasswindow: flare trace of pc_hot_loop exited $sasswindow_status"
  # A window that ends while the program runs: its stop is made at the
  # program's next launch, inside the launch's callback (judged below too).
  echo "-- the same with --deep-for 300ms (the window ends while the program launches)" |
    tee -a "$sasswindow_out"
  rm -rf "$session-300ms"
  PC_HOT_LOOP_MS=0.5 sasswindow_run -q -o "$session-300ms" --deep-after 1500ms \
    --deep-for 300ms --deep-engine sass -- "$build/gpu/pc_hot_loop_sass" 3 > "$work/sasswindow-300ms.stdout" 2>&1
  sasswindow_status=$?
  tee -a "$sasswindow_out" < "$work/sasswindow-300ms.stdout"
  echo "   exit $sasswindow_status" | tee -a "$sasswindow_out"
  [ "$sasswindow_status" -eq 0 ] || fail "sasswindow: flare trace of pc_hot_loop (300 ms window) exited $sasswindow_status"
  gpu_sql "$session-300ms/session.db" "SELECT 'window', engine, engine_status, \
    engine_samples, engine_reason FROM windows" "SELECT 'rows', COUNT(*) FROM sass_metrics" \
    "SELECT level, message FROM log WHERE message LIKE '%SASS%'" 2>&1 | tee -a "$sasswindow_out"
  echo "-- flare report" | tee -a "$sasswindow_out"
  "$flare" report "$session" > "$work/sasswindow-report.txt" 2>&1 ||
    fail "sasswindow: flare report of the session"
  tee -a "$sasswindow_out" < "$work/sasswindow-report.txt"
  # Every launch is inside the NVTX range "step": the values split by the window's
  # untimed launches (untimed_launches) all land there, none in "(no kernel in the window)".
  grep -Eq "by scope \(smsp__sass_inst_executed split by kernels\): step (100\.0|99\.[0-9])%" \
    "$work/sasswindow-report.txt" ||
    fail "sasswindow: the report does not put the window's instructions in scope step (by scope line)"
  for sasswindow_which in "" -300ms; do
    warps=$(awk '$1 == "pc_hot_loop" {for (i = 2; i < NF; i++) if ($i == "warps") print $(i + 1)}' \
      "$work/sasswindow$sasswindow_which.stdout")
    iters=$(awk '$1 == "pc_hot_loop" {for (i = 2; i < NF; i++) if ($i == "hot_iters") print $(i + 1)}' \
      "$work/sasswindow$sasswindow_which.stdout")
    echo "-- tests/gpu/sass_window_check.py $session$sasswindow_which ${warps:-?} ${iters:-?}" |
      tee -a "$sasswindow_out"
    python3 tests/gpu/sass_window_check.py "$session$sasswindow_which" "${warps:-x}" "${iters:-x}" 2>&1 |
      tee -a "$sasswindow_out"
    [ "${PIPESTATUS[0]}" -eq 0 ] ||
      fail "sasswindow: the SASS window's check failed for $session$sasswindow_which (tests/gpu/sass_window_check.py, $OUT/sass-window.txt)"
  done
  gpu_sql "$session/session.db" "SELECT feature, status, reason FROM capabilities WHERE feature IN \
    ('sass_metrics', 'pc_source_lines', 'pm_sampling', 'pc_sampling')" 2>&1 | tee -a "$sasswindow_out"

  # CUPTI refuses a metric: the window is refused with its words, the run ends well.
  session="$work/sasswindow-bad-metric"
  rm -rf "$session"
  echo "-- FLARE_SASS_METRICS=smsp__sass_inst_executed,no_such_metric (the window must be refused)" |
    tee -a "$sasswindow_out"
  FLARE_SASS_METRICS=smsp__sass_inst_executed,no_such_metric PC_HOT_LOOP_MS=0.5 \
    sasswindow_run -q -o "$session" --deep-after 1s --deep-for 300ms --deep-engine sass -- \
    "$build/gpu/pc_hot_loop_sass" 2 >> "$sasswindow_out" 2>&1 ||
    fail "sasswindow: the run with a bad SASS metric exited $?"
  refused=$(gpu_sql "$session/session.db" "SELECT engine_status || ': ' || engine_reason FROM windows" 2>&1)
  echo "   window: $refused" | tee -a "$sasswindow_out"
  case "$refused" in
    *no_such_metric*) ;;
    *) fail "sasswindow: a bad SASS metric's window does not say so: $refused" ;;
  esac
else
  fail "sasswindow: nvcc pc_hot_loop"
fi

if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  session="$work/sasswindow-torch"
  rm -rf "$session"
  echo "-- PyTorch: flare trace --deep-after 11s --deep-for 30s --deep-engine sass -- pc_torch.py" \
    "--seconds 12" | tee -a "$sasswindow_out"
  sasswindow_run -q -o "$session" --deep-after 11s --deep-for 30s --deep-engine sass -- \
    python3 tests/gpu/pc_torch.py --seconds 12 >> "$sasswindow_out" 2>&1 ||
    fail "sasswindow: flare trace of pc_torch.py under a sass window exited $?"
  gpu_sql "$session/session.db" "SELECT level, message FROM log WHERE message LIKE '%SASS%' \
    OR message LIKE '%sass%'" 2>&1 | tail -20 | tee -a "$sasswindow_out"
  gpu_sql "$session/session.db" "SELECT 'window', engine, engine_status, engine_samples, engine_reason, \
      (closed_ns - opened_ns) / 1e6 || ' ms' FROM windows" \
    "SELECT 'rows', COUNT(*), COUNT(DISTINCT function), COUNT(DISTINCT function || pc_offset), \
      SUM(file IS NOT NULL) FROM v_sass_metrics" \
    "SELECT 'top', substr(function, 1, 80), metric, SUM(value) FROM v_sass_metrics \
      WHERE metric = 'smsp__sass_inst_executed' GROUP BY function ORDER BY 4 DESC LIMIT 5" \
    "SELECT 'kernels in the window', COUNT(*) FROM v_kernels k JOIN windows w \
      ON k.end_ns > w.opened_ns AND k.start_ns < w.closed_ns" \
    "SELECT 'capability', feature, reason FROM capabilities WHERE feature = 'sass_metrics'" 2>&1 |
    tee -a "$sasswindow_out"
  rows=$(gpu_sql "$session/session.db" "SELECT COUNT(*) FROM sass_metrics" 2>/dev/null)
  [ "${rows:-0}" -gt 0 ] || fail "sasswindow: the PyTorch sass window stored no SASS metrics"
else
  echo "sasswindow: no PyTorch with CUDA here: the PyTorch SASS window is not run" | tee -a "$sasswindow_out"
fi
unset -f sasswindow_run sasswindow_tree
