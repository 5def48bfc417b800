# gpu-check-multi.sh: kernel replay on several GPUs at once (issue 9), sourced
# by scripts/gpu-check.sh (`multi`; not part of `all`, which runs on one GPU).
# Needs a machine with two or more GPUs (the H200 x2 kind or larger).
#
# tests/gpu/multi_rmw.cu runs one host thread per GPU, each launching a
# read-modify-write kernel; `flare replay` replays every launch (2 passes).
# Run once with the threads at once and once one after another; then
# tests/gpu/check_multi.py checks results, that replays on different GPUs
# overlap in time (stored pass timestamps) and never on one GPU, that kernels
# are attributed to the right device, and reports the speed-up over the
# serialised run. NVLink multicast stays off: NCCL is not used, and
# NCCL_NVLS_ENABLE=0 is set for anything that might.
echo "== several GPUs: concurrent replay"
export NCCL_NVLS_ENABLE=0 FLARE_PM=0
multi_dir="$work/multi"
rm -rf "$multi_dir"; mkdir -p "$multi_dir"
gpus=$(nvidia-smi -L | wc -l)
if [ "$gpus" -lt 2 ]; then
  fail "gpu-check multi needs 2 or more GPUs; this machine has $gpus"
else
  nvcc -O2 -arch=sm_90 -o "$build/gpu/multi_rmw" tests/gpu/multi_rmw.cu || fail "nvcc multi_rmw"
  for mode in concurrent serial; do
    extra=(); [ "$mode" = serial ] && extra=(--serial)
    timeout 300 "$flare" replay -q -o "$multi_dir/$mode" --kernel multi_rmw \
      --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct -- \
      "$build/gpu/multi_rmw" --footprint-mib 1024 --launches 4 "${extra[@]}" \
      > "$multi_dir/$mode.json" 2> "$multi_dir/$mode.err" || fail "multi_rmw $mode"
    tail -2 "$multi_dir/$mode.err"
  done
  # PM samples on a multi-GPU machine: plain tracing with a scheduled window
  # (PM sampling set up at the first context, ~0.7 s), every GPU busy for
  # about 3 s.
  echo "-- PM sampling while every GPU works"
  FLARE_PM=1 timeout 300 "$flare" trace -q -o "$multi_dir/pm" --deep-after 1500ms --deep-for 1s -- \
    "$build/gpu/multi_rmw" --footprint-mib 256 --launches 20000 \
    > "$multi_dir/pm.json" 2> "$multi_dir/pm.err" || fail "multi_rmw under flare trace (PM)"
  tail -2 "$multi_dir/pm.err"
  python3 tests/gpu/check_multi.py "$multi_dir" "$OUT/multi-summary.json" || fail "multi-GPU checks"
fi
