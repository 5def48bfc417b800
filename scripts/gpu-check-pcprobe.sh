# gpu-check-pcprobe.sh: part "pcprobe" of scripts/gpu-check.sh (sourced there;
# uses its $build, $OUT and fail; it must not exit). A study before flare gets
# a PC-sampling engine: tests/gpu/pc_sampling_probe.cu drives CUPTI's PC
# Sampling API bare (continuous mode, start/stop control, no flare in the
# process) on a known pointer-chasing hot loop and an arithmetic kernel:
# samples, drop counters, stall reasons and source lines at periods 2^10 and
# 2^5 cycles, the same with the enable after the module loaded (late), sample
# counts and drops over periods 5..15, and what sampling costs the kernels
# (not enabled, enabled idle, sampling). Every run is bounded (timeout -k 10
# 120; the probe has its own deadlines). JSON lines and the probe's stderr go
# to $OUT/pc-probe.txt. Must never change the build.
echo "== pcprobe: bare CUPTI PC sampling (tests/gpu/pc_sampling_probe.cu)"
pcprobe_cupti_lib=$(dirname "$(ls /usr/local/cuda*/targets/*/lib/libcupti.so /usr/local/cuda/lib64/libcupti.so \
  /usr/local/cuda/extras/CUPTI/lib64/libcupti.so 2>/dev/null | head -1)")
mkdir -p "$build/gpu"
: > "$OUT/pc-probe.txt"
if nvcc -O2 -lineinfo -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/pc_sampling_probe" \
     tests/gpu/pc_sampling_probe.cu -L"$pcprobe_cupti_lib" -L/usr/local/cuda/lib64/stubs -lcupti -lcuda \
     -Xlinker -rpath -Xlinker "$pcprobe_cupti_lib"; then
  # RUN:EXPECTED exit status, as the H200 answered in session 14
  # (docs/PERFORMANCE.md): 3 is "sampling ran but no sample came back"
  # (period 2^5 fills the hardware buffer; a late enable gives only
  # non-user-kernel samples; the cost run's sampling state enables after its
  # first launches, so it times the kernels with no records), 1 from periods
  # is its 2^5 and 2^8 runs. A different status is a change worth a look.
  for pcprobe_run in "sample 10 20:0" "sample 5 20:3" "sample 10 20 late:3" "periods 10:1" \
                     "cost 10 20 7:3"; do
    pcprobe_args=${pcprobe_run%:*}
    pcprobe_expected=${pcprobe_run##*:}
    echo "-- pc_sampling_probe $pcprobe_args (expected exit $pcprobe_expected)" | tee -a "$OUT/pc-probe.txt"
    # shellcheck disable=SC2086 # the words are the probe's arguments
    timeout -k 10 120 "$build/gpu/pc_sampling_probe" $pcprobe_args 2>&1 \
      | tee -a "$OUT/pc-probe.txt"
    pcprobe_status=${PIPESTATUS[0]}
    [ "$pcprobe_status" -eq "$pcprobe_expected" ] ||
      fail "pcprobe: pc_sampling_probe $pcprobe_args exited $pcprobe_status, expected $pcprobe_expected"
  done
else
  fail "pcprobe: nvcc pc_sampling_probe"
fi
