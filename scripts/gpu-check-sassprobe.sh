# gpu-check-sassprobe.sh: part "sassprobe" of scripts/gpu-check.sh (sourced there;
# uses its $build, $OUT and fail; it must not exit). A study before flare gets a
# SASS-metrics deep engine (issue 26): tests/gpu/sass_metrics_probe.cu drives
# CUPTI's SASS Metrics API bare (no flare in the process) on a known dependent-load
# loop and an FMA loop: the chip's metric list, per-instruction counts checked
# exactly against launches x warps x iterations with their source lines (lazy and
# eager patching), what patching costs the kernels and what each call costs, and a
# deep window's life (four windows in one process, then Enable/FlushData/Disable
# from a second thread while the main one launches). Every run is bounded
# (timeout -k 10 150; the probe has its own 110 s deadline, which names the step
# under way). JSON lines and the probe's stderr go to $OUT/sass-probe.txt. Must
# never change the build.
echo "== sassprobe: bare CUPTI SASS metrics (tests/gpu/sass_metrics_probe.cu)"
sassprobe_cupti_lib=$(dirname "$(ls /usr/local/cuda*/targets/*/lib/libcupti.so /usr/local/cuda/lib64/libcupti.so \
  /usr/local/cuda/extras/CUPTI/lib64/libcupti.so 2>/dev/null | head -1)")
mkdir -p "$build/gpu"
: > "$OUT/sass-probe.txt"
if nvcc -O2 -lineinfo -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/sass_metrics_probe" \
     tests/gpu/sass_metrics_probe.cu -L"$sassprobe_cupti_lib" -L/usr/local/cuda/lib64/stubs -lcupti -lcuda \
     -lpthread -Xlinker -rpath -Xlinker "$sassprobe_cupti_lib"; then
  # RUN:ALLOWED exit statuses. 0 everywhere: the counts exact, no leak between
  # windows. window's 4 is a finding, not a failure: Enable, FlushData or Disable
  # from a second thread failed or hung (reported in its line). Anything else
  # fails the part: 1 a call the mode needs failed, 3 an expectation failed, 124
  # the probe's deadline (a hang), other signals a crash.
  # cost's 1 is a finding when the failed call is the second SetConfig: on the
  # H200 (CUDA 13.0, session 17) SetConfig after UnsetConfig in one process
  # answered CUPTI_ERROR_OUT_OF_MEMORY (its rounds' "off" state unsets the
  # configuration); its measurements up to there are printed all the same.
  for sassprobe_run in "list:0" "sample 10:0" "sample 10 eager:0" "cost 10 5:0 1" "cost 10 3 eager:0 1" \
                       "window:0 4" "window eager:0 4"; do
    sassprobe_args=${sassprobe_run%:*}
    sassprobe_allowed=${sassprobe_run##*:}
    echo "-- sass_metrics_probe $sassprobe_args (allowed exit: $sassprobe_allowed)" | tee -a "$OUT/sass-probe.txt"
    # shellcheck disable=SC2086 # the words are the probe's arguments
    timeout -k 10 150 "$build/gpu/sass_metrics_probe" $sassprobe_args 2>&1 | tee "$work/sass-probe-run.txt" \
      >> "$OUT/sass-probe.txt"
    sassprobe_status=${PIPESTATUS[0]}
    if [ "$sassprobe_status" -eq 1 ] && [[ $sassprobe_args == cost* ]] &&
       ! grep -q "cuptiSassMetricsSetConfig: CUPTI_ERROR_OUT_OF_MEMORY" "$work/sass-probe-run.txt"; then
      fail "sassprobe: sass_metrics_probe $sassprobe_args exited 1, and not at the second SetConfig"
    elif [ "$sassprobe_status" -eq 1 ] && [[ $sassprobe_args == cost* ]]; then
      echo "NOTE: sassprobe: $sassprobe_args: SetConfig after UnsetConfig refused (OUT_OF_MEMORY)" \
        | tee -a "$OUT/sass-probe.txt"
    elif [[ " $sassprobe_allowed " != *" $sassprobe_status "* ]]; then
      fail "sassprobe: sass_metrics_probe $sassprobe_args exited $sassprobe_status, allowed $sassprobe_allowed"
    elif [ "$sassprobe_status" -eq 4 ]; then
      echo "NOTE: sassprobe: $sassprobe_args: a call from a second thread failed or hung (see its cross_thread line)" \
        | tee -a "$OUT/sass-probe.txt"
    fi
  done
else
  fail "sassprobe: nvcc sass_metrics_probe"
fi
