# gpu-check-replay.sh: kernel replay on a real GPU, sourced by scripts/gpu-check.sh
# (`replay` or `all`), which provides $flare, $build, $work, $OUT and fail().
#
# Checks that a replayed read-modify-write kernel leaves the program's result
# identical to an unprofiled run (a sibling stream writing meanwhile), that a
# module-scope __device__ variable is found and restored, and that metric
# values agree with ncu on the same kernel; measures flare against ncu
# wall-clock for the same metric set and launches, flare's per-pass cost
# against CUPTI's own kernel-replay mode, snapshot/restore bandwidth against
# the device-to-device copy for 64 MiB to 16 GiB, and the CUPTI checkpoint
# API. tests/gpu/check_replay.py judges; numbers land in $OUT/replay-summary.json.
# Never reads or changes anything outside $work and $OUT.

echo "== kernel replay"
# PM sampling enables itself on the first context and then holds the device's
# counters: the range profiler would get CUPTI_ERROR_HARDWARE_BUSY (seen on the
# H200). Until the two share the per-device lease, replay runs without it.
export FLARE_PM=0
command -v ncu >/dev/null || export PATH="$PATH:/usr/local/cuda/bin"
replay_dir="$work/replay"
rm -rf "$replay_dir"
mkdir -p "$replay_dir"
nvcc -O2 -arch=sm_90 -o "$build/gpu/replay_rmw" tests/gpu/replay_rmw.cu || fail "nvcc replay_rmw"
nvcc -O2 -arch=sm_90 -DREPLAY_RMW_DEVICE_VAR -o "$build/gpu/replay_rmw_var" tests/gpu/replay_rmw.cu \
  || fail "nvcc replay_rmw_var"
build_replay_baselines
rmw="$build/gpu/replay_rmw"
timed() { # timed NAME CMD...: stdout to NAME.json, stderr to NAME.err, start and end to NAME.wall
  local name=$1; shift
  local t0=$EPOCHREALTIME
  timeout 150 "$@" > "$replay_dir/$name.json" 2> "$replay_dir/$name.err"
  local rc=$?
  echo "$t0 $EPOCHREALTIME" > "$replay_dir/$name.wall"
  tail -3 "$replay_dir/$name.err"
  [ $rc -eq 0 ] || fail "$name exited $rc"
}
footprint=1024

echo "-- warm-up: one untimed profiled run"
# The first process to use the GPU's profiler after the machine starts pays
# about 450 ms more in its first cuptiRangeProfilerStart (685-697 ms against
# 196-330 ms later, measured on the H200); without this, whichever tool ran
# first would carry it.
"$flare" replay -q -o "$replay_dir/warm-up" --kernel rmw --launch 1 --metrics gpu__time_duration.sum \
  -- "$rmw" --footprint-mib 64 --launches 1 --no-sibling >/dev/null 2>&1 || fail "profiler warm-up run"

echo "-- unprofiled reference (1 GiB, 3 launches, sibling stream)"
timed plain "$rmw" --footprint-mib $footprint --launches 3
cat "$replay_dir/plain.json"

echo "-- flare replay --kernel rmw --launch 2 --set speed-of-light"
timed flare-launch2 "$flare" replay -q -o "$replay_dir/flare-launch2" --kernel rmw --launch 2 \
  --set speed-of-light -- "$rmw" --footprint-mib $footprint --launches 3
# The set's metric names, as flare stored them, so ncu collects exactly the same.
sol_metrics=$(python3 -c "import sqlite3,sys; print(','.join(r[0] for r in sqlite3.connect(sys.argv[1]).execute('SELECT DISTINCT metric FROM replay_metrics ORDER BY metric')))" \
  "$replay_dir/flare-launch2/session.db")
[ -n "$sol_metrics" ] || sol_metrics=$("$flare" replay --list-sets \
  | awk '/^  [a-z]/ {inside = ($1 == "speed-of-light")} inside && /__/ {print $1}' | paste -sd, -)
echo "speed-of-light: $sol_metrics"
[ -n "$sol_metrics" ] || fail "no replay metrics in the flare session"
ncu_args=(--metrics "$sol_metrics" --replay-mode kernel --cache-control none --clock-control none
  --print-units base --csv -k regex:rmw)
echo "-- ncu, the same launch and metrics"
timed ncu-launch2 ncu "${ncu_args[@]}" --launch-skip 1 --launch-count 1 \
  --log-file "$replay_dir/ncu-launch2.csv" "$rmw" --footprint-mib $footprint --launches 3

echo "-- every rmw launch (3): flare replay, then ncu"
timed flare-all "$flare" replay -q -o "$replay_dir/flare-all" --kernel rmw --set speed-of-light \
  -- "$rmw" --footprint-mib $footprint --launches 3
timed ncu-all ncu "${ncu_args[@]}" --launch-count 3 --log-file "$replay_dir/ncu-all.csv" \
  "$rmw" --footprint-mib $footprint --launches 3

echo "-- the same launch with CUPTI's counter availability image fetched (FLARE_REPLAY_COUNTER_AVAILABILITY=1)"
timed flare-launch2-availability env FLARE_REPLAY_COUNTER_AVAILABILITY=1 "$flare" replay -q \
  -o "$replay_dir/flare-launch2-availability" --kernel rmw --launch 2 --set speed-of-light \
  -- "$rmw" --footprint-mib $footprint --launches 3
python3 - "$replay_dir" <<'PY'
import sqlite3, sys
def values(name):
    db = sqlite3.connect(f"{sys.argv[1]}/{name}/session.db")
    return dict(db.execute("SELECT metric, value FROM replay_metrics"))
plain, fetched = values("flare-launch2"), values("flare-launch2-availability")
for metric in sorted(plain):
    b = fetched.get(metric)
    ratio = plain[metric] / b if b else float("nan")
    print(f"  {metric:60} without image {plain[metric]:.6g} with image {b if b is None else format(b, '.6g')} ratio {ratio:.4f}")
PY
for run in flare-launch2 flare-launch2-availability flare-all; do
  echo "-- where $run's time went (CUPTI calls, from flare.log)"
  grep -E "range profiler" "$replay_dir/$run/flare.log" | cut -c1-400
done

echo "-- CUPTI's own kernel-replay mode, same kernel and metrics"
timed cupti-kernel-replay "$build/gpu/replay_baselines" kernel-replay "$sol_metrics" $footprint 3
cat "$replay_dir/cupti-kernel-replay.json"

echo "-- bare CUPTI range profiler, user replay, one kernel: the floor under any tool built on it"
timed range-floor "$build/gpu/replay_baselines" range-floor "$sol_metrics" 1 3 none

echo "-- a module-scope __device__ variable is found and restored"
timed device-var "$flare" replay -q -o "$replay_dir/device-var" --kernel rmw --launch 2 \
  --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct -- "$build/gpu/replay_rmw_var" \
  --footprint-mib 64 --launches 3

echo "-- snapshot and restore bandwidth, 64 MiB to 16 GiB (2-pass metric set)"
for size in 64 256 1024 4096 16384; do
  timed "sweep-$size" "$flare" replay -q -o "$replay_dir/sweep-$size" --kernel rmw --launch 2 \
    --metrics lts__t_sector_hit_rate.pct,dram__bytes_read.sum -- "$rmw" --footprint-mib $size \
    --launches 2 --no-sibling --dtod
done

echo "-- CUPTI checkpoint API, same footprints"
timed checkpoint "$build/gpu/replay_baselines" checkpoint 64 1024 4096 16384
cat "$replay_dir/checkpoint.json"

python3 tests/gpu/check_replay.py "$replay_dir" "$OUT/replay-summary.json" || fail "kernel replay checks"
"$flare" report "$replay_dir/flare-all" > "$OUT/replay-report.txt" 2>&1 || fail "flare report of a replay session"
sed -n '/[Rr]eplay/,$p' "$OUT/replay-report.txt" | head -40
tar -czf "$OUT/replay-sessions.tgz" -C "$work" replay 2>/dev/null || true
unset FLARE_PM
