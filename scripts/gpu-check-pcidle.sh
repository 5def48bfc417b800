# gpu-check-pcidle.sh: part "pcidle" of scripts/gpu-check.sh (sourced there;
# uses its $build, $flare, $work, $OUT and fail; it must not exit). What PC
# sampling enabled but never started costs a launch-bound program (issue 26:
# "prepared but idle" <= 0.5% outside windows), two ways, so that flare's cost
# can be read against CUPTI's own floor:
#   1. CUPTI alone, in one process: tests/gpu/pc_sampling_probe.cu `launches 18
#      20000 ROUNDS` (FLARE_PCIDLE_PROBE_ROUNDS, default 15; period 2^18, flare's default; tiny launches timed with PC
#      sampling disabled and enabled-idle in turn, paired by round), pinned to
#      one CPU (taskset -c ${FLARE_PCIDLE_PROBE_CPU:-2}) where taskset exists;
#   2. flare: bench/gpu_engine_cost.py with trace-timed and pc-idle only, each
#      run pinned to ${FLARE_PCIDLE_CPUS:-2-5}, ${FLARE_PCIDLE_ROUNDS:-12}
#      rounds, on pm_window bench (its tiny launches in 20 batches, the median
#      batch's ns per launch compared: one batch per process was the noise).
# Ends with two lines, "pcidle: CUPTI's floor ..." and "pcidle: flare's pc-idle
# cost ...", both in ns per launch. Every run is bounded (timeout -k 10; the
# probe also has its own deadline). Everything goes to $OUT/pc-idle.txt. Must
# never leave a session in $OUT.
# shellcheck shell=bash disable=SC2154
echo "== pcidle: PC sampling enabled but idle on tiny launches: CUPTI alone, then flare"
pcidle_txt="$OUT/pc-idle.txt"
: > "$pcidle_txt"
mkdir -p "$build/gpu"
pcidle_pin=()
pcidle_cpus=${FLARE_PCIDLE_CPUS:-2-5}
pcidle_probe_rounds=${FLARE_PCIDLE_PROBE_ROUNDS:-15}
if command -v taskset > /dev/null; then
  pcidle_pin=(taskset -c "${FLARE_PCIDLE_PROBE_CPU:-2}")
else
  echo "NOTE: pcidle: no taskset here; the runs are not pinned" | tee -a "$pcidle_txt"
  pcidle_cpus=""
fi

# 1. CUPTI's floor. stdout (the JSON lines) and stderr are kept apart, so a
# line of one cannot cut into a line of the other before the summary is read.
# shellcheck disable=SC2012 # fixed CUDA paths; the first that exists
pcidle_cupti_lib=$(dirname "$(ls /usr/local/cuda*/targets/*/lib/libcupti.so /usr/local/cuda/lib64/libcupti.so \
  /usr/local/cuda/extras/CUPTI/lib64/libcupti.so 2>/dev/null | head -1)")
pcidle_floor="not measured"
if nvcc -O2 -lineinfo -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/pc_sampling_probe" \
     tests/gpu/pc_sampling_probe.cu -L"$pcidle_cupti_lib" -L/usr/local/cuda/lib64/stubs -lcupti -lcuda \
     -Xlinker -rpath -Xlinker "$pcidle_cupti_lib"; then
  # ${a[@]+"${a[@]}"}: an empty array is "unbound" to set -u before bash 4.4.
  echo "-- ${pcidle_pin[*]+${pcidle_pin[*]} }pc_sampling_probe launches 18 20000 ${pcidle_probe_rounds}" | tee -a "$pcidle_txt"
  PCP_DEADLINE_S=150 timeout -k 10 180 ${pcidle_pin[@]+"${pcidle_pin[@]}"} \
    "$build/gpu/pc_sampling_probe" launches 18 20000 "$pcidle_probe_rounds" \
    > "$work/pcidle-probe.out" 2> "$work/pcidle-probe.err"
  pcidle_status=$?
  cat "$work/pcidle-probe.out" "$work/pcidle-probe.err" | tee -a "$pcidle_txt"
  [ "$pcidle_status" -eq 0 ] || fail "pcidle: pc_sampling_probe launches exited $pcidle_status, expected 0"
  pcidle_floor=$(python3 - "$work/pcidle-probe.out" <<'PY'
import json, sys
summary = None
for line in open(sys.argv[1]):
    try:
        row = json.loads(line)
    except ValueError:
        continue
    if row.get("mode") == "launches" and row.get("summary"):
        summary = row
if summary is None or summary.get("b_minus_a_ns_per_launch_median") is None:
    print("not measured (no summary with a b - a pair)")
else:
    s = summary
    print(f"{s['b_minus_a_ns_per_launch_median']:+.1f} ns a launch "
          f"(min {s['b_minus_a_ns_per_launch_min']:+.1f}, max {s['b_minus_a_ns_per_launch_max']:+.1f}, "
          f"{s['pairs']} pairs, {s['basis']}; b's launch rate {s['b_rate_vs_a_median']:.4f} of a's; "
          f"toggle {'ok' if s['toggle_enable_ok'] else 'failed: ' + str(s['toggle_error'])})")
PY
)
else
  fail "pcidle: nvcc pc_sampling_probe"
fi

# 2. flare's pc-idle against trace-timed (every kernel timed in both, as in a
# process with PC sampling enabled), pm_window rebuilt for its batched timing.
pcidle_flare="not measured"
pcidle_rounds=${FLARE_PCIDLE_ROUNDS:-12}
if nvcc -O2 -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/pm_window" tests/gpu/pm_window.cu -ldl; then
  echo "-- gpu_engine_cost.py trace-timed,pc-idle, $pcidle_rounds rounds, CPUs ${pcidle_cpus:-any}" \
    | tee -a "$pcidle_txt"
  # About 5 s a run, two runs a round; the bound leaves room for slow starts.
  FLARE_ENGINE_COST_CONFIGS=trace-timed,pc-idle FLARE_ENGINE_COST_CPUS=$pcidle_cpus PYTHONUNBUFFERED=1 \
    timeout -k 10 $((60 + 25 * pcidle_rounds)) \
    python3 bench/gpu_engine_cost.py "$flare" "$build/gpu/pm_window" "$work" "$pcidle_rounds" 2>&1 \
    | tee "$work/pcidle-engine-cost.txt" >> "$pcidle_txt"
  pcidle_status=${PIPESTATUS[0]}
  cat "$work/pcidle-engine-cost.txt"
  [ "$pcidle_status" -eq 0 ] || fail "pcidle: gpu_engine_cost.py exited $pcidle_status"
  # "  launch_ns_median pc-idle  difference median +N ns a launch (...)"; the
  # rate-derived "per launch" figure where pm_window printed no launch_ns_median.
  pcidle_flare=$(sed -n 's/^  launch_ns_median pc-idle *difference median \(.*\)$/\1/p' \
    "$work/pcidle-engine-cost.txt" | head -1)
  if [ -z "$pcidle_flare" ]; then
    pcidle_flare=$(sed -n 's/^  launches_per_second pc-idle .*, per launch \(.*\)$/\1 (from launches_per_second)/p' \
      "$work/pcidle-engine-cost.txt" | head -1)
  fi
  pcidle_flare=${pcidle_flare:-not measured}
else
  fail "pcidle: nvcc pm_window"
fi

{
  echo "pcidle: CUPTI's floor, PC sampling enabled idle vs not (bare probe, one process, b - a): $pcidle_floor"
  echo "pcidle: flare's pc-idle cost vs trace-timed (pm_window, pinned processes, paired): $pcidle_flare"
} | tee -a "$pcidle_txt"
