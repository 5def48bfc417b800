# gpu-check-multi.sh: kernel replay on several GPUs at once (issue 9), sourced
# by scripts/gpu-check.sh (`multi`; not part of `all`, which runs on one GPU).
# Needs a machine with two or more GPUs (the H200 x2 kind or larger).
#
# tests/gpu/multi_rmw.cu runs one host thread per GPU, each launching a
# read-modify-write kernel; `flare replay` replays every launch (2 passes).
# Run once with the threads at once and once one after another, and as one
# process per GPU (all at once); then
# tests/gpu/check_multi.py checks results, that replays on different GPUs
# overlap in time (stored pass timestamps) and never on one GPU, that kernels
# are attributed to the right device, and reports the speed-up over the
# serialised run. NVLink multicast stays off: NCCL is not used, and
# NCCL_NVLS_ENABLE=0 is set for anything that might.
# run_watched SECONDS NAME CMD...: runs CMD; if it is still running after
# SECONDS, writes where every thread of it and its children waits (wchan, and
# a stack when eu-stack or gdb is installed) straight to $OUT/multi-hang.txt
# (kept even if the device's time limit ends the script), then kills it and
# fails.
run_watched() {
  local limit=$1 name=$2; shift 2
  "$@" &
  local pid=$! waited=0
  while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt "$limit" ]; do sleep 1; waited=$((waited + 1)); done
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid"
    return
  fi
  local pids="$pid" grown=1
  while [ "$grown" = 1 ]; do # the process and all its descendants
    grown=0
    for p in $pids; do
      for child in $(pgrep -P "$p"); do
        [[ " $pids " == *" $child "* ]] || { pids="$pids $child"; grown=1; }
      done
    done
  done
  {
  echo "HUNG: $name still running after ${limit}s; its threads:"
  for p in $pids; do
    for task in /proc/"$p"/task/*; do
      echo "  pid $p tid ${task##*/} $(cat "$task/comm" 2>/dev/null) wchan=$(cat "$task/wchan" 2>/dev/null)" \
        "state=$(awk '{print $3}' "$task/stat" 2>/dev/null)"
    done
    # Bounded: a thread stuck inside the driver (state D) can hang a debugger too.
    if command -v eu-stack >/dev/null; then timeout -k 5 20 eu-stack -p "$p" 2>&1 | head -150
    elif command -v gdb >/dev/null; then
      timeout -k 5 20 gdb -p "$p" -batch -ex 'thread apply all bt 12' 2>&1 | head -200
    fi
  done
  } >> "$OUT/multi-hang.txt" 2>&1
  kill -9 $pids 2>/dev/null
  # A process stuck in the driver may not die even then: never wait on it
  # for long (two runs of this script on the H200 x2 were lost that way).
  for waited in $(seq 1 10); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "HUNG: $name did not die after SIGKILL (stuck in the driver?)" >> "$OUT/multi-hang.txt"
  else
    wait "$pid" 2>/dev/null
  fi
  return 124
}

echo "== several GPUs: concurrent replay"
export NCCL_NVLS_ENABLE=0 FLARE_PM=0
multi_dir="$work/multi"
rm -rf "$multi_dir"; mkdir -p "$multi_dir"
gpus=$(nvidia-smi -L | wc -l)
if [ "$gpus" -lt 2 ]; then
  fail "gpu-check multi needs 2 or more GPUs; this machine has $gpus"
else
  nvcc -O2 -arch=sm_90 -o "$build/gpu/multi_rmw" tests/gpu/multi_rmw.cu || fail "nvcc multi_rmw"
  # CUPTI alone, no flare: its kernel replay on each GPU by itself, then on
  # every GPU at once from one thread each. Whether CUPTI profiles GPUs of
  # one process in parallel bounds what flare's concurrent replay can gain.
  build_replay_baselines
  echo "-- CUPTI's own kernel replay: each GPU alone, then every GPU at once"
  # To a file, not through a pipe: a process stuck in the driver would keep
  # a pipe open after timeout's SIGKILL.
  for together in alone together; do
    timeout -k 10 120 "$build/gpu/replay_baselines" kernel-replay-devices \
      dram__bytes_read.sum,lts__t_sector_hit_rate.pct 1024 6 $together >> "$multi_dir/cupti-devices.json" \
      || fail "CUPTI kernel replay on several GPUs ($together)"
  done
  cat "$multi_dir/cupti-devices.json"
  # concurrent: the threads at once; turns: the same with
  # FLARE_REPLAY_SERIAL_DEVICES=1 (devices take turns collecting); quiet: at
  # once without CUPTI activity tracing (CUPTI 13.4 Update 1 lists a fixed
  # deadlock "when a device buffer was allocated during kernel launch", which
  # is what a snapshot does); serial: the threads one after the other.
  # Repeated: concurrent runs hung in 2 of 7.
  for mode in concurrent turns quiet concurrent-2 turns-2 quiet-2 concurrent-3 turns-3 serial; do
    extra=(); [ "$mode" = serial ] && extra=(--serial)
    turns=0; [[ "$mode" == turns* ]] && turns=1
    activity=1; [[ "$mode" == quiet* ]] && activity=0
    FLARE_CUDA_ACTIVITY=$activity FLARE_REPLAY_SERIAL_DEVICES=$turns run_watched 45 "multi_rmw $mode" \
      "$flare" replay -q -o "$multi_dir/$mode" --kernel multi_rmw \
      --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct -- \
      "$build/gpu/multi_rmw" --footprint-mib 1024 --launches 4 "${extra[@]}" \
      > "$multi_dir/$mode.json" 2> "$multi_dir/$mode.err" || fail "multi_rmw $mode"
    tail -2 "$multi_dir/$mode.err"
  done
  [ -f "$OUT/multi-hang.txt" ] && cat "$OUT/multi-hang.txt"
  # One process per GPU, both at once (as data-parallel training runs):
  # whether separate processes escape the contention seen within one.
  # Waited for by pid: a bare `wait` would also wait for anything the
  # watchdog above could not kill.
  process_pids=()
  for device in $(seq 0 $((gpus - 1))); do
    CUDA_VISIBLE_DEVICES=$device timeout -k 10 60 "$flare" replay -q -o "$multi_dir/process-$device" \
      --kernel multi_rmw --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct -- \
      "$build/gpu/multi_rmw" --footprint-mib 1024 --launches 4 \
      > "$multi_dir/process-$device.json" 2> "$multi_dir/process-$device.err" &
    process_pids+=($!)
  done
  for pid in "${process_pids[@]}"; do wait "$pid" || fail "one process per GPU (pid $pid)"; done
  # PM samples on a multi-GPU machine: plain tracing with a scheduled window
  # (PM sampling set up at the first context, ~0.7 s), every GPU busy for
  # about 3 s.
  echo "-- PM sampling while every GPU works"
  FLARE_PM=1 timeout -k 10 60 "$flare" trace -q -o "$multi_dir/pm" --deep-after 1500ms --deep-for 1s -- \
    "$build/gpu/multi_rmw" --footprint-mib 256 --launches 20000 \
    > "$multi_dir/pm.json" 2> "$multi_dir/pm.err" || fail "multi_rmw under flare trace (PM)"
  tail -2 "$multi_dir/pm.err"
  python3 tests/gpu/check_multi.py "$multi_dir" "$OUT/multi-summary.json" || fail "multi-GPU checks"
  tar -czf "$OUT/multi-sessions.tgz" -C "$work" multi 2>/dev/null || true
fi
