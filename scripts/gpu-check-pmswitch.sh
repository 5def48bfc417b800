# gpu-check-pmswitch.sh: part "pmswitch" of scripts/gpu-check.sh (sourced there;
# uses its $build, $OUT and fail; it must not exit). A study before flare replays a
# span once per PM-sampling configuration (issue 25, item 3):
# tests/gpu/pm_switch_probe.cu drives CUPTI's PM sampling bare (no flare in the
# process) and measures what switching the configuration between passes costs with
# one cuptiPmSamplingEnable kept across passes (warm: is SetConfig accepted while
# enabled and stopped?), with Disable + Enable around every pass (cold), and with
# one configuration set once (fixed, the floor); what building each configuration
# image costs; and that each pass decoded samples of the configuration just set.
# First flare's 512 MiB hardware buffer, then a 32 MiB one (does the buffer's size
# set the cost of Enable and SetConfig?). Every run is bounded (timeout -k 10 120;
# the probe has its own 110 s deadline, which names the step under way). JSON
# lines and the probe's stderr go to $OUT/pm-switch.txt. Must never change the
# build.
echo "== pmswitch: bare CUPTI PM sampling, switching configurations (tests/gpu/pm_switch_probe.cu)"
pmswitch_cupti_lib=$(dirname "$(ls /usr/local/cuda*/targets/*/lib/libcupti.so /usr/local/cuda/lib64/libcupti.so \
  /usr/local/cuda/extras/CUPTI/lib64/libcupti.so 2>/dev/null | head -1)")
mkdir -p "$build/gpu"
: > "$OUT/pm-switch.txt"
if nvcc -O2 -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/pm_switch_probe" \
     tests/gpu/pm_switch_probe.cu -L"$pmswitch_cupti_lib" -L/usr/local/cuda/lib64/stubs -lcupti -lcuda \
     -Xlinker -rpath -Xlinker "$pmswitch_cupti_lib"; then
  # Exit 0 only: a refused SetConfig while enabled is a finding the probe reports
  # with status 0 (its "finding" line); 1 a call failed, 3 a pass decoded no
  # sample or no configuration could be built, 124 the probe's deadline.
  for pmswitch_run in "512:12 100" "32:12 100"; do
    pmswitch_mb=${pmswitch_run%%:*}
    pmswitch_args=${pmswitch_run#*:}
    echo "-- PMS_HW_BUFFER_MB=$pmswitch_mb pm_switch_probe $pmswitch_args" | tee -a "$OUT/pm-switch.txt"
    # shellcheck disable=SC2086 # the words are the probe's arguments
    PMS_HW_BUFFER_MB=$pmswitch_mb timeout -k 10 120 "$build/gpu/pm_switch_probe" $pmswitch_args 2>&1 \
      | tee -a "$OUT/pm-switch.txt" | grep -v '"kind":"pass"'
    pmswitch_status=${PIPESTATUS[0]}
    [ "$pmswitch_status" -eq 0 ] ||
      fail "pmswitch: PMS_HW_BUFFER_MB=$pmswitch_mb pm_switch_probe $pmswitch_args exited $pmswitch_status"
  done
else
  fail "pmswitch: nvcc pm_switch_probe"
fi
