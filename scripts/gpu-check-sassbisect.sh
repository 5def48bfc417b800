# gpu-check-sassbisect.sh: part "sassbisect" of scripts/gpu-check.sh (sourced there;
# uses its $flare, $build, $work, $OUT, fail and gpu_sql; it must not exit). Finds which of
# flare's pieces keeps CUPTI's SASS metric counts at 0 in flare's windows on the H200
# while the bare-CUPTI probe counts exactly (session 18). Two halves, each run bounded:
#   * the bare probe (tests/gpu/sass_metrics_probe.cu, `sample 10`) with flare's
#     default metric list instead of the probe's, then with parts of CUPTI activity
#     tracing (SMP_ACTIVITY: kernels, copies, the periodic flush, a flush before the SASS
#     flush, kernel activity off around the SASS window or before its flush), and with
#     every driver-API callback on, configured before the modules load;
#   * flare's sass window on tests/gpu/pc_hot_loop.cu (as part sasswindow) with several
#     metric lists, and with activity tracing off (FLARE_CUDA_ACTIVITY=0).
# Each run's counts are printed (the probe's check lines; flare's rows and sums per
# metric); nothing is judged here beyond "the run ended". Output: $OUT/sass-bisect.txt.
# Must never change the build or the environment of the parts sourced after it.
# $flare, $build, $work and $OUT are gpu-check.sh's:
# shellcheck shell=bash disable=SC2154
echo "== sassbisect: which of flare's pieces keeps SASS counts at 0"
sassbisect_out="$OUT/sass-bisect.txt"
: > "$sassbisect_out"
mkdir -p "$build/gpu"
sassbisect_lib=$(dirname "$(ls /usr/local/cuda*/targets/*/lib/libcupti.so /usr/local/cuda/lib64/libcupti.so \
  /usr/local/cuda/extras/CUPTI/lib64/libcupti.so 2>/dev/null | head -1)")
sassbisect_flare_metrics=smsp__sass_inst_executed,smsp__sass_thread_inst_executed,smsp__sass_sectors_mem_global,smsp__sass_sectors_mem_global_ideal

if nvcc -O2 -lineinfo -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/sass_metrics_probe" \
     tests/gpu/sass_metrics_probe.cu -L"$sassbisect_lib" -L/usr/local/cuda/lib64/stubs -lcupti -lcuda \
     -lpthread -Xlinker -rpath -Xlinker "$sassbisect_lib"; then
  sassbisect_all="SMP_EARLY_CONFIG=1 SMP_DRIVER_CB=1 SMP_NVTX_CB=1 SMP_TIMESTAMP_CB=1"
  for sassbisect_env in "SMP_ACTIVITY=kcpo" "SMP_TIMESTAMP_CB=1" "SMP_NVTX_CB=1" \
                        "$sassbisect_all SMP_METRICS=$sassbisect_flare_metrics" \
                        "$sassbisect_all SMP_ACTIVITY=kcpo SMP_METRICS=$sassbisect_flare_metrics"; do
    echo "-- probe: $sassbisect_env sass_metrics_probe sample 10" | tee -a "$sassbisect_out"
    # shellcheck disable=SC2086 # the words are assignments
    env $sassbisect_env timeout -k 10 150 "$build/gpu/sass_metrics_probe" sample 10 \
      > "$work/sassbisect-probe.json" 2> "$work/sassbisect-probe.err"
    echo "   exit $?" | tee -a "$sassbisect_out"
    tee -a "$sassbisect_out" < "$work/sassbisect-probe.err"
    grep -E '"(check|summary|config)"' "$work/sassbisect-probe.json" | cut -c1-600 | tee -a "$sassbisect_out"
  done
else
  fail "sassbisect: nvcc sass_metrics_probe"
fi


if nvcc -O2 -lineinfo -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/pc_hot_loop_sass" \
     tests/gpu/pc_hot_loop.cu -ldl; then
  sassbisect_runs=0
  for sassbisect_env in "FLARE_SASS_METRICS=$sassbisect_flare_metrics" \
                        "FLARE_SASS_METRICS=smsp__sass_inst_executed" \
                        "FLARE_SASS_METRICS=smsp__sass_thread_inst_executed,smsp__sass_inst_executed" \
                        "FLARE_CUDA_ACTIVITY=0"; do
    sassbisect_runs=$((sassbisect_runs + 1))
    session="$work/sassbisect-$sassbisect_runs"
    rm -rf "$session"
    echo "-- flare: $sassbisect_env PC_HOT_LOOP_MS=0.5 flare trace --deep-after 1500ms --deep-for 30s" \
      "--deep-engine sass -- pc_hot_loop 3" | tee -a "$sassbisect_out"
    # shellcheck disable=SC2086 # the words are assignments
    env $sassbisect_env PC_HOT_LOOP_MS=0.5 FLARE_CUDA_PC_LOG="$work/sassbisect-calls.$sassbisect_runs" \
      timeout -k 5 60 "$flare" trace -o "$session" --deep-after 1500ms --deep-for 30s \
      --deep-engine sass -- "$build/gpu/pc_hot_loop_sass" 3 > "$work/sassbisect.stdout" 2>&1
    echo "   exit $?" | tee -a "$sassbisect_out"
    grep -E "pc_hot_loop|SASS|sass" "$work/sassbisect.stdout" | cut -c1-300 | tail -12 | tee -a "$sassbisect_out"
    gpu_sql "$session/session.db" \
      "SELECT 'window', engine, engine_status, engine_samples, engine_reason FROM windows" \
      "SELECT 'metric', metric, COUNT(*), SUM(value), MAX(value) FROM v_sass_metrics GROUP BY metric" \
      "SELECT 'top', substr(function, 1, 40), pc_offset, metric, value FROM v_sass_metrics \
         ORDER BY value DESC LIMIT 3" \
      "SELECT 'log', message FROM log WHERE message LIKE '%SASS%' OR message LIKE '%sass%'" 2>&1 |
      cut -c1-400 | tee -a "$sassbisect_out"
    grep -i "sass" "$work/sassbisect-calls.$sassbisect_runs" 2>/dev/null | head -12 | tee -a "$sassbisect_out"
  done
else
  fail "sassbisect: nvcc pc_hot_loop"
fi
