# gpu-check-pcwindow.sh: part "pcwindow" of scripts/gpu-check.sh (sourced there;
# uses its $flare, $build, $work, $OUT and fail; it must not exit). flare's
# CUDA PC-sampling deep window on a known hot loop (issue 26): builds
# tests/gpu/pc_hot_loop.cu (hot_chain: dependent global loads in a loop of a
# few instructions; cheap_math: FMAs in registers; about 5 ms a launch,
# alternating, for 4 s) and traces it with one scheduled window that asks for
# PC sampling (--deep-after 1500ms --deep-for 500ms --deep-engine pc, the
# default FLARE_PC_PERIOD), prints `flare report` of the session (its "PC
# samples" section) and runs tests/gpu/pc_window_check.py on it, which fails
# unless the window ran the PC engine (a fallback to pm fails with its
# engine_reason), hot_chain's top stall reason is long_scoreboard and >= 80% of
# its samples lie within 256 bytes of code, and cheap_math's top reason is
# not long_scoreboard. Then the same run with FLARE_PC_PERIOD=20us, only to
# show that the period matters: both runs' sample totals are printed, the
# second run's check is shown but not judged. The check's self-test runs
# first (no GPU). A run still going after 120 s has its threads dumped
# (name, state, wait channel, syscall) and is killed. Output goes to
# $OUT/pc-window.txt; the sessions stay in $work, never in $OUT. Last, where
# PyTorch has CUDA, tests/gpu/pc_torch.py (cuBLAS's GEMM and torch's
# element-wise kernels) with one PC window, checked by
# tests/gpu/pc_torch_check.py: the samples must land, under the kernels'
# own names, in the kernels that took the window's GPU time. Must never
# change the build or the environment of the parts sourced after it.
# $flare, $build, $work and $OUT are gpu-check.sh's:
# shellcheck shell=bash disable=SC2154
echo "== pcwindow: a PC-sampling deep window on a known hot loop (tests/gpu/pc_hot_loop.cu)"
# The CUDA PC engine is on wherever a window asks for pc (cuda_pc.h) and
# FLARE_CUDA_PC is not 0.
pcwindow_out="$OUT/pc-window.txt"
: > "$pcwindow_out"
mkdir -p "$build/gpu"
python3 tests/gpu/pc_window_check.py --self-test > "$work/pc-window-self-test.txt" 2>&1 ||
  { tail -20 "$work/pc-window-self-test.txt"; fail "pcwindow: self-test of tests/gpu/pc_window_check.py"; }

# pcwindow_tree PID: PID and its descendants, one per line.
# pcwindow_dump PID: every thread of PID and its descendants (name, state,
# kernel wait channel, syscall) into $pcwindow_out: where a run that does
# not end is stuck (the first H200 window hung, session 14).
pcwindow_tree() {
  local child
  echo "$1"
  for child in $(pgrep -P "$1"); do
    pcwindow_tree "$child"
  done
}

pcwindow_dump() {
  local pid task
  for pid in $(pcwindow_tree "$1"); do
    [ -d "/proc/$pid" ] || continue
    echo "   process $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline" | cut -c1-120)"
    for task in /proc/"$pid"/task/*; do
      echo "     thread ${task##*/} $(cat "$task/comm") state $(awk '{print $3}' "$task/stat")" \
        "wchan $(cat "$task/wchan" 2>/dev/null) syscall $(cut -d' ' -f1 "$task/syscall" 2>/dev/null)"
    done
  done | tee -a "$pcwindow_out"
}

# pcwindow_run SESSION_ARGS...: flare trace (its arguments given) in the
# background; after 120 s still running (the session's end disassembles
# PyTorch's cubins for the SASS text of its kernels), its threads are dumped and it is
# killed (status 124). Returns flare trace's exit status.
pcwindow_run() {
  "$flare" trace "$@" >> "$pcwindow_out" 2>&1 &
  local pid=$! waited=0
  while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 1200 ]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "   still running after 120 s: its threads" | tee -a "$pcwindow_out"
    pcwindow_dump "$pid"
    # shellcheck disable=SC2046 # one pid per word
    kill -KILL $(pcwindow_tree "$pid") 2>/dev/null
    wait "$pid" 2>/dev/null
    return 124
  fi
  wait "$pid"
}

# pcwindow_trace SESSION [VAR=VALUE...]: pc_hot_loop 4 under flare trace with
# one scheduled PC window, FLARE_PC_PERIOD unset unless VAR=VALUE sets it,
# CUPTI's PC calls logged to SESSION.pc-calls (printed after); returns flare
# trace's exit status.
pcwindow_trace() {
  local session=$1 status
  shift
  rm -rf "$session" "$session.pc-calls"
  echo "-- ${*:-FLARE_PC_PERIOD unset (the default)}: flare trace --deep-after 1500ms --deep-for 500ms" \
    "--deep-engine pc -- pc_hot_loop 4" | tee -a "$pcwindow_out"
  (
    unset FLARE_PC_PERIOD
    export FLARE_CUDA_PC_LOG="$session.pc-calls"
    # shellcheck disable=SC2163 # VAR=VALUE words, exported as given
    [ $# -eq 0 ] || export "$@"
    pcwindow_run -q -o "$session" --deep-after 1500ms --deep-for 500ms --deep-engine pc -- \
      "$build/gpu/pc_hot_loop" 4
  )
  status=$?
  echo "   CUPTI PC calls (first 12 and last 12 of $(wc -l 2>/dev/null < "$session.pc-calls") lines):" |
    tee -a "$pcwindow_out"
  { head -12 "$session.pc-calls"; echo "   ..."; tail -12 "$session.pc-calls"; } 2>/dev/null |
    tee -a "$pcwindow_out"
  return "$status"
}

# pcwindow_total CHECK_OUTPUT: the session's sample total the check printed, or "none".
pcwindow_total() {
  awk '$1 == "pc_samples_total" && NF == 2 {total = $2} END {print total == "" ? "none" : total}' "$1"
}

rm -f "$build/gpu/pc_hot_loop"
if nvcc -O2 -lineinfo -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/pc_hot_loop" tests/gpu/pc_hot_loop.cu \
     -ldl; then
  pcwindow_trace "$work/pcwindow" || fail "pcwindow: flare trace of pc_hot_loop exited $?"
  echo "-- flare report" | tee -a "$pcwindow_out"
  "$flare" report "$work/pcwindow" 2>&1 | tee -a "$pcwindow_out"
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "pcwindow: flare report of the session"
  echo "-- tests/gpu/pc_window_check.py" | tee -a "$pcwindow_out"
  python3 tests/gpu/pc_window_check.py "$work/pcwindow" > "$work/pc-window-check.txt" 2>&1
  pcwindow_status=$?
  tee -a "$pcwindow_out" < "$work/pc-window-check.txt"
  [ "$pcwindow_status" -eq 0 ] ||
    fail "pcwindow: the PC window's check failed (tests/gpu/pc_window_check.py, $OUT/pc-window.txt)"

  pcwindow_trace "$work/pcwindow-20us" FLARE_PC_PERIOD=20us ||
    fail "pcwindow: flare trace of pc_hot_loop with FLARE_PC_PERIOD=20us exited $?"
  echo "-- tests/gpu/pc_window_check.py, FLARE_PC_PERIOD=20us (shown, not judged)" | tee -a "$pcwindow_out"
  python3 tests/gpu/pc_window_check.py "$work/pcwindow-20us" > "$work/pc-window-check-20us.txt" 2>&1
  tee -a "$pcwindow_out" < "$work/pc-window-check-20us.txt"
  pcwindow_default=$(pcwindow_total "$work/pc-window-check.txt")
  pcwindow_20us=$(pcwindow_total "$work/pc-window-check-20us.txt")
  echo "pcwindow: PC samples in the window: default period $pcwindow_default, FLARE_PC_PERIOD=20us" \
    "$pcwindow_20us$(awk -v a="$pcwindow_default" -v b="$pcwindow_20us" \
      'BEGIN {if (a + 0 > 0 && b + 0 > 0) printf " (%.2fx)", b / a}')" | tee -a "$pcwindow_out"

  # A rule's PM window and the scheduled PC window at once on one device:
  # PM sampling is then never set up (the rule's window is refused, saying
  # why), and the run must end, exit 0: enabling PM sampling beside PC
  # sampling crashed the program inside CUPTI (session 15, SIGSEGV 0.9 s in).
  # FLARE_CRASH_TRACE=1 prints a crashing thread's backtrace, and a failure
  # is followed by the same run again and with FLARE_CUDA_PC=0.
  pcwindow_both() {
    local session=$1
    shift
    rm -rf "$session" "$session.pc-calls"
    (
      unset FLARE_PC_PERIOD
      export FLARE_CRASH_TRACE=1 FLARE_CUDA_PC_LOG="$session.pc-calls"
      # shellcheck disable=SC2163 # VAR=VALUE words, exported as given
      [ $# -eq 0 ] || export "$@"
      pcwindow_run -q -o "$session" \
        --deep-when 'kernel_duration_p99 > 1ms for 1s over 1s deep_for 1500ms max_windows 1' \
        --deep-after 1500ms --deep-for 500ms --deep-engine pc -- "$build/gpu/pc_hot_loop" 4
    )
  }
  echo "-- a PM rule window beside the PC window (the lease decides)" | tee -a "$pcwindow_out"
  pcwindow_both "$work/pcwindow-both"
  pcwindow_status=$?
  "$flare" report "$work/pcwindow-both" 2>&1 | tee -a "$pcwindow_out" | grep -i -A8 "window"
  if [ "$pcwindow_status" -ne 0 ]; then
    fail "pcwindow: PM rule beside the PC window exited $pcwindow_status"
    { echo "   CUPTI PC calls:"; cat "$work/pcwindow-both.pc-calls";
      echo "   flare.log (last 30 lines):"; tail -30 "$work/pcwindow-both/flare.log"; } 2>&1 |
      tee -a "$pcwindow_out"
    for variant in again FLARE_CUDA_PC=0; do
      echo "-- the same, $variant" | tee -a "$pcwindow_out"
      if [ "$variant" = again ]; then pcwindow_both "$work/pcwindow-both-$variant"
      else pcwindow_both "$work/pcwindow-both-pc0" "$variant"; fi
      echo "   exit $?" | tee -a "$pcwindow_out"
    done
  fi
else
  fail "pcwindow: nvcc pc_hot_loop"
fi

# A window opened while the program launches nothing (pm_window bench makes
# its context, then sleeps 2 s before its first kernel; the window opens 1 s
# in, after the context, which PC sampling needs): PC sampling starts at the program's
# next launch (it used to be refused after 1 s), and a window the program
# launches nothing in ends with no samples, its start withdrawn (never made
# later). Checked in the databases and CUPTI's call log.
pcwindow_pause() {
  local session=$1 length=$2 expect=$3
  rm -rf "$session" "$session.pc-calls"
  echo "-- a window over a pause: --deep-after 1s --deep-for $length --deep-engine pc -- pm_window" \
    "bench (expect $expect)" | tee -a "$pcwindow_out"
  ( unset FLARE_PC_PERIOD; export FLARE_CUDA_PC_LOG="$session.pc-calls"
    pcwindow_run -q -o "$session" --deep-after 1s --deep-for "$length" --deep-engine pc -- \
      "$build/gpu/pm_window" bench ) || fail "pcwindow: pm_window bench under a $length PC window exited $?"
  python3 - "$session" "$expect" "$session.pc-calls" <<'PY' 2>&1 | tee -a "$pcwindow_out"
import os, sqlite3, sys
session, expect, calls = sys.argv[1:4]
db = sqlite3.connect(f"file:{session}/session.db?mode=ro", uri=True)
windows = db.execute("SELECT engine, engine_status, engine_samples, engine_reason, opened_ns IS NOT NULL "
                     "FROM windows").fetchall()
rows = db.execute("SELECT COUNT(*), COALESCE(SUM(samples), 0) FROM pc_samples").fetchone()
# The call log is created at install: missing, the starts are unknown (a fail).
starts = sum("cuptiPCSamplingStart begin" in line for line in open(calls)) if os.path.exists(calls) else -1
print(f"   windows {windows}; pc_samples rows {rows[0]}, samples {rows[1]}; cuptiPCSamplingStart calls {starts}")
ok = len(windows) == 1 and windows[0][0] == "cuda-pc-sampling" and windows[0][1] == "disarmed" and windows[0][4]
if expect == "samples":
    ok = ok and rows[1] > 0 and starts == 1
else:
    ok = ok and rows[1] == 0 and starts == 0
print(f"   pause check ({expect}): {'PASS' if ok else 'FAIL'}")
if not ok:  # what flare said, for the why
    for level, message in db.execute("SELECT level, message FROM log ORDER BY time_ns").fetchall():
        print(f"   log {level}: {message}")
sys.exit(0 if ok else 1)
PY
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "pcwindow: a PC window over a pause ($expect)"
}
if [ -x "$build/gpu/pm_window" ] ||
   nvcc -O2 -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/pm_window" tests/gpu/pm_window.cu -ldl; then
  pcwindow_pause "$work/pcwindow-pause" 2500ms samples
  pcwindow_pause "$work/pcwindow-nolaunch" 500ms none
else
  fail "pcwindow: nvcc pm_window"
fi

# The same for a PyTorch program (tests/gpu/pc_torch.py: cuBLAS's fp32 GEMM and
# torch's element-wise kernels, C++ names): the window's samples must land in
# the kernels that took its GPU time, under the names its kernel records have
# (tests/gpu/pc_torch_check.py). torch's import and CUDA start take seconds,
# so the window opens 8 s in, while the 12 s of steps run.
python3 tests/gpu/pc_torch_check.py --self-test > "$work/pc-torch-self-test.txt" 2>&1 ||
  { tail -20 "$work/pc-torch-self-test.txt"; fail "pcwindow: self-test of tests/gpu/pc_torch_check.py"; }
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "-- PyTorch: flare trace --deep-after 8s --deep-for 1s --deep-engine pc -- pc_torch.py --seconds 12" |
    tee -a "$pcwindow_out"
  rm -rf "$work/pcwindow-torch"
  (
    unset FLARE_PC_PERIOD
    pcwindow_run -q -o "$work/pcwindow-torch" --deep-after 8s --deep-for 1s --deep-engine pc -- \
      python3 tests/gpu/pc_torch.py --seconds 12
  ) || fail "pcwindow: flare trace of pc_torch.py exited $?"
  "$flare" report "$work/pcwindow-torch" 2>&1 | tee -a "$pcwindow_out" | grep -i -A12 "PC samples"
  # The SASS text of torch's kernels (no line information): how long the
  # session's end took to disassemble them, and how many got one.
  "$flare" report "$work/pcwindow-torch" 2>&1 | grep -E "^  (sass_text|pc_source_lines) " |
    tee -a "$pcwindow_out"
  python3 - "$work/pcwindow-torch" <<'PY' 2>&1 | tee -a "$pcwindow_out"
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}/session.db?mode=ro", uri=True)
total = db.execute("SELECT SUM(samples) FROM pc_samples").fetchone()[0] or 0
texted = db.execute("SELECT SUM(p.samples) FROM pc_samples p JOIN pc_instructions i ON "
                    "i.pid = p.pid AND i.name_id = p.name_id AND i.pc_offset = p.pc_offset").fetchone()[0] or 0
left = db.execute("SELECT COUNT(*), COALESCE(SUM(length(bytes)), 0) FROM pc_cubins").fetchone()
print(f"   SASS text: {texted:,} of {total:,} samples ({100.0 * texted / max(total, 1):.1f}%); "
      f"cubins left {left[0]} ({left[1] / 1048576:.1f} MiB)")
PY
  echo "-- tests/gpu/pc_torch_check.py" | tee -a "$pcwindow_out"
  python3 tests/gpu/pc_torch_check.py "$work/pcwindow-torch" 2>&1 | tee -a "$pcwindow_out"
  [ "${PIPESTATUS[0]}" -eq 0 ] ||
    fail "pcwindow: the PyTorch PC window's check failed (tests/gpu/pc_torch_check.py, $OUT/pc-window.txt)"
else
  echo "pcwindow: no PyTorch with CUDA here: the PyTorch PC window is not checked" | tee -a "$pcwindow_out"
fi
unset -f pcwindow_tree pcwindow_dump pcwindow_run pcwindow_both pcwindow_pause
