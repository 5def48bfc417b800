# gpu-check-pmreplay.sh: part "pmreplay" of scripts/gpu-check.sh (sourced there; uses its
# $flare, $work, $OUT, fail and gpu_sql; must not exit). Issue 25's performance target for
# range replay by PM sampling: a PyTorch step of 500-512 kernels (tests/gpu/pm_replay_step.py,
# about 5 us to 3.4 ms, about 190 of them 100 us or more) measured by
#   flare replay --range step --method pm            (PM sampling, session pm-session)
#   flare replay --range step --set overview          (the range profiler, same metrics: rp-session)
#   flare replay --range step --set speed-of-light    (range replay as it is: sol-session)
#   ncu --replay-mode kernel on the span's launches, same metrics (and ncu profiling nothing)
#   tests/gpu/pm_switch_probe.cu, bare CUPTI, one pass as long as the pm run's with its
#   metrics and interval: CUPTI's floor for one replayed pass ($pmr_dir/floor.txt)
# and judged by tests/gpu/check_pm_replay.py: per-kernel values of kernels >= the minimum
# within 5% of the range profiler's (median), >= 100x less time than ncu, >= 10x less than
# range replay. Summary in $OUT/pmreplay-summary.json, sessions and logs in
# $OUT/pmreplay-logs.tar.gz. About 3-8 min on the H200, bounded by FLARE_PMREPLAY_BUDGET_S
# (default 470 s; ncu gets what is left, at most 400 s).
#
# Knobs: FLARE_PMREPLAY_INTERVAL (10us), FLARE_PMREPLAY_MIN_KERNEL (100us),
# FLARE_PMREPLAY_NCU_KERNELS (all: ncu replays the span's first K kernels and its time is
# scaled to the whole span, said so in the output), FLARE_PMREPLAY_ARGS (more arguments for
# the program, e.g. "--matmuls 0" or "--ops 500").
#
# Must never: set FLARE_PM for the pm runs (the method needs PM sampling: they run with it
# unset, even when an earlier part exported FLARE_PM=0), write outside $work/pmreplay and
# $OUT, or export anything but PATH (ncu) and CUBLAS_WORKSPACE_CONFIG (as part span does).

echo "== pmreplay: range replay by PM sampling against the range profiler and ncu (issue 25)"
pmr_t0=$SECONDS
pmr_budget=${FLARE_PMREPLAY_BUDGET_S:-470}
pmr_dir="$work/pmreplay"
rm -rf "$pmr_dir"
mkdir -p "$pmr_dir"
command -v ncu >/dev/null || export PATH="$PATH:/usr/local/cuda/bin"
export CUBLAS_WORKSPACE_CONFIG=:4096:8
pmr_interval=${FLARE_PMREPLAY_INTERVAL:-10us}
pmr_min=${FLARE_PMREPLAY_MIN_KERNEL:-100us}
pmr_ncu_kernels=${FLARE_PMREPLAY_NCU_KERNELS:-all}
# shellcheck disable=SC2206 # FLARE_PMREPLAY_ARGS is split on blanks on purpose
pmr_program=(python3 tests/gpu/pm_replay_step.py --steps 4 --mark 3 ${FLARE_PMREPLAY_ARGS:-})
# The warm-ups' program: the same ops, 64 of them, at 1/64 of the sizes.
pmr_small=(python3 tests/gpu/pm_replay_step.py --steps 3 --mark 2 --ops 64 --scale 0.015625)
pmr_say() { echo "-- [$((SECONDS - pmr_t0)) s] $*"; }
pmr_left() { echo $((pmr_budget - (SECONDS - pmr_t0))); }
# pmr_cap N: a run's timeout, N seconds but no more than the budget leaves after 60 s kept
# for the rest (20 s at least), so that a hung run cannot carry the part past its budget.
pmr_cap() {
  local room=$(($(pmr_left) - 60))
  [ "$room" -lt 20 ] && room=20
  echo $(($1 < room ? $1 : room))
}
# pmr_timed NAME LIMIT_S CMD...: stdout NAME.json, stderr NAME.err, "start end" NAME.wall,
# exit status NAME.rc; returns the command's status.
pmr_timed() {
  local name=$1 limit=$2
  shift 2
  local t0=$EPOCHREALTIME
  timeout -k 10 "$limit" "$@" > "$pmr_dir/$name.json" 2> "$pmr_dir/$name.err"
  local rc=$?
  local t1=$EPOCHREALTIME
  echo "$t0 $t1" > "$pmr_dir/$name.wall"
  echo "$rc" > "$pmr_dir/$name.rc"
  echo "   $name: exit $rc, $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s wall"
  tail -3 "$pmr_dir/$name.err" | cut -c1-300
  return "$rc"
}
# pmr_span SESSION: "kernels declined" of its span, or nothing.
pmr_span() {
  gpu_sql "$1/session.db" "SELECT kernels || ' ' || declined FROM replay_spans ORDER BY begin_ns LIMIT 1" \
    2>/dev/null | head -1
}

# The overview set as flare lists it (its metrics go to --metrics where the set is missing,
# and to ncu).
pmr_metrics=$("$flare" replay --list-sets |
  awk '/^  [a-z]/ {inside = ($1 == "overview")} inside && /__/ {print $1}' | paste -sd, -)
if [ -n "$pmr_metrics" ]; then
  pmr_what=(--set overview)
else
  pmr_metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_active.avg,gr__cycles_elapsed.max,sm__pipe_tensor_cycles_active.avg
  pmr_what=(--metrics "$pmr_metrics")
  echo "no 'overview' in flare replay --list-sets: its expected metrics by --metrics instead"
fi
echo "overview: $pmr_metrics"
echo "program: ${pmr_program[*]}; PM interval $pmr_interval, minimum kernel $pmr_min"
# shellcheck disable=SC2086 # FLARE_PMREPLAY_ARGS is split on blanks on purpose
python3 tests/gpu/pm_replay_step.py --plan ${FLARE_PMREPLAY_ARGS:-} |
  python3 -c 'import json, sys; d = json.load(sys.stdin); d.pop("by_size"); print("plan (estimates):", json.dumps(d))'

pmr_say "unprofiled"
if ! pmr_timed plain "$(pmr_cap 180)" "${pmr_program[@]}"; then
  fail "pmreplay: the program failed unprofiled (see $pmr_dir/plain.err); part skipped"
else
  cat "$pmr_dir/plain.json"
  # The first process to use the GPU's profiler after the machine starts pays about 450
  # ms more in its first cuptiRangeProfilerStart (part span); PM sampling's first set-up
  # may too. One small untimed run of each takes it, so no timed run carries it.
  pmr_say "profiler warm-ups (range profiler, PM sampling; untimed)"
  timeout -k 10 "$(pmr_cap 120)" env FLARE_PM=0 "$flare" replay -q -o "$pmr_dir/warm-rp" --range step \
    --metrics gpu__time_duration.sum -- "${pmr_small[@]}" >/dev/null 2>"$pmr_dir/warm-rp.err" ||
    fail "pmreplay: range-profiler warm-up run (see $pmr_dir/warm-rp.err)"
  timeout -k 10 "$(pmr_cap 120)" env -u FLARE_PM "$flare" replay -q -o "$pmr_dir/warm-pm" --range step --method pm \
    --pm-interval "$pmr_interval" --pm-min-kernel "$pmr_min" "${pmr_what[@]}" -- "${pmr_small[@]}" \
    >/dev/null 2>"$pmr_dir/warm-pm.err" || fail "pmreplay: PM-sampling warm-up run (see $pmr_dir/warm-pm.err)"

  pmr_say "flare replay --range step --method pm --pm-interval $pmr_interval --pm-min-kernel $pmr_min ${pmr_what[*]}"
  pmr_timed pm "$(pmr_cap 150)" env -u FLARE_PM "$flare" replay -q -o "$pmr_dir/pm-session" --range step --method pm \
    --pm-interval "$pmr_interval" --pm-min-kernel "$pmr_min" "${pmr_what[@]}" -- "${pmr_program[@]}" ||
    fail "pmreplay: the pm run exited $(cat "$pmr_dir/pm.rc")"
  grep -E "range replay|PM sampling" "$pmr_dir/pm-session/flare.log" 2>/dev/null | cut -c1-400 | head -8

  pmr_say "flare replay --range step ${pmr_what[*]} (the range profiler, same metrics)"
  pmr_timed rp "$(pmr_cap 150)" env FLARE_PM=0 "$flare" replay -q -o "$pmr_dir/rp-session" --range step \
    "${pmr_what[@]}" -- "${pmr_program[@]}" || fail "pmreplay: the rp run exited $(cat "$pmr_dir/rp.rc")"
  grep -E "range replay|range profiler" "$pmr_dir/rp-session/flare.log" 2>/dev/null | cut -c1-400 | head -6

  pmr_say "flare replay --range step --set speed-of-light (range replay as it is)"
  pmr_timed sol "$(pmr_cap 150)" env FLARE_PM=0 "$flare" replay -q -o "$pmr_dir/sol-session" --range step \
    --set speed-of-light -- "${pmr_program[@]}" || fail "pmreplay: the sol run exited $(cat "$pmr_dir/sol.rc")"

  # CUPTI's floor for one replayed pass (issue 25's 100x target): bare CUPTI PM sampling,
  # no flare in the process (tests/gpu/pm_switch_probe.cu, its "fixed" mode: one Enable and
  # SetConfig, then passes of Start, work, Stop, DecodeData, GetCounterDataInfo, every
  # sample evaluated), at the same interval over work as long as the pm pass's.
  pmr_work_ms=$(sed -n 's/.*range replay by PM sampling, pass 1: .* work \([0-9.]*\),.*/\1/p' \
    "$pmr_dir/pm-session/flare.log" 2>/dev/null | head -1)
  pmr_work_ms=${pmr_work_ms%.*}
  [ -n "$pmr_work_ms" ] && [ "$pmr_work_ms" -gt 0 ] 2>/dev/null || pmr_work_ms=65
  pmr_interval_us=$(python3 -c "import sys; t = sys.argv[1]; print(int(float(t[:-2]) * {'us': 1, 'ms': 1000}.get(t[-2:], 0)) or 10)" "$pmr_interval" 2>/dev/null || echo 10)
  pmr_cupti_lib=$(dirname "$(ls /usr/local/cuda*/targets/*/lib/libcupti.so /usr/local/cuda/lib64/libcupti.so \
    /usr/local/cuda/extras/CUPTI/lib64/libcupti.so 2>/dev/null | head -1)")
  pmr_say "CUPTI's floor: pm_switch_probe (bare CUPTI), ${pmr_work_ms} ms passes every ${pmr_interval_us} us"
  if nvcc -O2 -arch=sm_90 -I/usr/local/cuda/include -o "$pmr_dir/pm_switch_probe" tests/gpu/pm_switch_probe.cu \
       -L"$pmr_cupti_lib" -L/usr/local/cuda/lib64/stubs -lcupti -lcuda -Xlinker -rpath -Xlinker "$pmr_cupti_lib"; then
    # The same sampled metrics as the pm run (time comes from kernel records, not sampled);
    # every sample evaluated serially, then again on 8 threads and compared bit for bit.
    PMS_METRICS=$(echo "$pmr_metrics" | tr ',' '\n' | grep -v '^gpu__time_duration' | paste -sd, -) \
    PMS_EVAL_THREADS=8 PMS_WORK_MS=$pmr_work_ms PMS_EVAL_MAX=1000000 timeout -k 10 "$(pmr_cap 90)" \
      "$pmr_dir/pm_switch_probe" 3 "$pmr_interval_us" > "$pmr_dir/floor.txt" 2> "$pmr_dir/floor.err" ||
      fail "pmreplay: the floor probe exited $? (see $pmr_dir/floor.err)"
    tail -2 "$pmr_dir/floor.err" | cut -c1-400
  else
    fail "pmreplay: nvcc pm_switch_probe (the floor)"
  fi

  pmr_count="" pmr_declined=""
  for pmr_session in rp pm; do
    read -r pmr_count pmr_declined <<< "$(pmr_span "$pmr_dir/$pmr_session-session")"
    [ -n "$pmr_count" ] && [ "$pmr_declined" = 0 ] && break
  done
  echo "span: ${pmr_count:-?} kernels (from $pmr_session-session), declined ${pmr_declined:-?}"
  if [ -z "$pmr_count" ] || [ "$pmr_declined" != 0 ] || [ "$pmr_count" -lt 500 ] || [ "$pmr_count" -gt 512 ]; then
    # What the step launched, counted without flare (torch.profiler): over 512 kernels
    # declines the span.
    pmr_say "the span is declined or off 500-512 kernels: counting the step's kernels with torch.profiler"
    pmr_timed count "$(pmr_cap 120)" "${pmr_program[@]}" --count-kernels && cat "$pmr_dir/count.json"
  fi

  # ncu gets the step as a launch range (as in part span): flare logs how many kernels the
  # program had launched when the span began, counted at the launch call as ncu counts.
  pmr_skip=""
  for pmr_session in rp pm sol; do
    pmr_skip=$(sed -n 's/.*range replay: span .* after \([0-9]*\) kernel launches by the program.*/\1/p' \
      "$pmr_dir/$pmr_session-session/flare.log" 2>/dev/null | head -1)
    [ -n "$pmr_skip" ] && break
  done
  pmr_k=all
  if [ -z "$pmr_skip" ] || [ -z "$pmr_count" ] || [ "$pmr_declined" != 0 ]; then
    fail "pmreplay: no launch count or no replayed span for ncu; ncu skipped"
  else
    pmr_k=$pmr_count
    if [ "$pmr_ncu_kernels" != all ] && [ "$pmr_ncu_kernels" -lt "$pmr_count" ]; then
      pmr_k=$pmr_ncu_kernels
      echo "ncu limited to the span's first $pmr_k of $pmr_count kernels (FLARE_PMREPLAY_NCU_KERNELS):" \
        "its time per kernel is scaled to all $pmr_count"
    fi
    pmr_ncu=(ncu --nvtx --replay-mode kernel --cache-control none --clock-control none
      --print-units base --csv --metrics "$pmr_metrics")
    pmr_say "ncu on nothing (its start-up and the program, subtracted)"
    pmr_timed ncu-off "$(pmr_cap 180)" "${pmr_ncu[@]}" --nvtx-include "nostep/" --log-file "$pmr_dir/ncu-off.csv" \
      "${pmr_program[@]}" || fail "pmreplay: ncu on nothing exited $(cat "$pmr_dir/ncu-off.rc")"
    pmr_limit=$(($(pmr_left) - 45))
    [ "$pmr_limit" -gt 400 ] && pmr_limit=400
    if [ "$pmr_limit" -lt 60 ]; then
      fail "pmreplay: only $((pmr_limit + 45)) s left of FLARE_PMREPLAY_BUDGET_S=$pmr_budget; ncu skipped"
    else
      pmr_say "ncu on launches $((pmr_skip + 1)) to $((pmr_skip + pmr_k)) (the span's$([ "$pmr_k" != "$pmr_count" ] && echo " first $pmr_k")), timeout $pmr_limit s"
      pmr_timed ncu "$pmr_limit" "${pmr_ncu[@]}" --launch-skip "$pmr_skip" --launch-count "$pmr_k" \
        --log-file "$pmr_dir/ncu.csv" "${pmr_program[@]}"
      pmr_rc=$(cat "$pmr_dir/ncu.rc")
      if [ "$pmr_rc" = 124 ] || [ "$pmr_rc" = 137 ]; then
        echo "ncu cut by its $pmr_limit s timeout after $(grep -c '==PROF== Profiling' "$pmr_dir/ncu.csv" 2>/dev/null)" \
          "kernels: its time per kernel is scaled to the span (an estimate; the check says so)"
      elif [ "$pmr_rc" != 0 ]; then
        grep -E "==ERROR==|==WARNING==" "$pmr_dir/ncu.csv" 2>/dev/null | head -5
        fail "pmreplay: ncu exited $pmr_rc"
      fi
    fi
  fi

  pmr_say "flare report on the pm session"
  "$flare" report "$pmr_dir/pm-session" > "$pmr_dir/pm-report.txt" 2>&1 ||
    fail "pmreplay: flare report on the pm session"
  grep -A16 "Range replay" "$pmr_dir/pm-report.txt" | cut -c1-160 | head -18

  pmr_say "tests/gpu/check_pm_replay.py"
  python3 tests/gpu/check_pm_replay.py "$pmr_dir" "$OUT/pmreplay-summary.json" --min-kernel "$pmr_min" \
    --ncu-kernels "$pmr_k" | tee "$pmr_dir/check.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "pmreplay: issue 25's targets not met (tests/gpu/check_pm_replay.py)"
fi
# The sessions (not the warm-ups'), the program's outputs, ncu's logs and the check, one
# archive (the device tool brings back few files).
tar -czf "$OUT/pmreplay-logs.tar.gz" -C "$pmr_dir" \
  $(cd "$pmr_dir" && ls -d *-session *.txt *.err *.csv *.json *.wall *.rc 2>/dev/null) 2>/dev/null
pmr_say "pmreplay done"
