# gpu-check-launchcosts.sh: part "launchcosts" of scripts/gpu-check.sh
# (sourced there; uses its $flare, $build, $work, $OUT, fail and
# build_bare_inject). Where each launch's cost goes (issue 22):
# bench/gpu_launch_costs.py over the launch-bound PyTorch loop, the CUDA C
# storm and a GPU-bound loop, flare's modes beside bare CUPTI with the same
# features (bench/cupti_bare_inject.c) and torch.profiler.
# FLARE_COSTS_WORKLOADS (default loop,storm,gpubound), FLARE_COSTS_ROUNDS
# (default 9), FLARE_COSTS_BUDGET_S (seconds for those workloads together,
# default 430; each gets its share). The word alternate in the list instead
# runs bench/gpu_cupti_alternate.py (bare CUPTI's states in turn inside one
# launch_loop.py process, FLARE_ALTERNATE_STEPS steps, default 20000, about
# 30 s; outside the budget) into launch-costs-alternate.txt; the word
# flare-alternate runs flare the same way (bench/gpu_cupti_alternate.py
# --flare-trace: flare switches all its tracing off and on in blocks), in
# the standard and the light mode, into launch-costs-flare-alternate.txt.
# Must never change the build.
echo "== where each launch's cost goes (bench/gpu_launch_costs.py)"
if build_bare_inject; then
  workloads=${FLARE_COSTS_WORKLOADS:-loop,storm,gpubound}
  budget=${FLARE_COSTS_BUDGET_S:-430}
  # Shares of the budget, by weight among the workloads asked for: the
  # PyTorch loop's runs are the longest.
  weight() { case "$1" in loop) echo 60 ;; storm) echo 30 ;; *) echo 18 ;; esac; }
  total=0
  for workload in ${workloads//,/ }; do
    [[ "$workload" == *alternate ]] || total=$((total + $(weight "$workload")))
  done
  for workload in ${workloads//,/ }; do
    [[ "$workload" != *alternate ]] || continue # not gpu_launch_costs.py's: below
    share=$((budget * $(weight "$workload") / total))
    PYTHONUNBUFFERED=1 python3 bench/gpu_launch_costs.py "$flare" "$PWD/$build" "$work" "$workload" \
      "${FLARE_COSTS_ROUNDS:-9}" "$share" | tee "$OUT/launch-costs-$workload.txt" \
      || fail "launch costs: $workload"
  done
  if [[ ",$workloads," == *",alternate,"* ]]; then
    PYTHONUNBUFFERED=1 python3 bench/gpu_cupti_alternate.py "$build/gpu/libcupti_bare_inject.so" \
      "$work" "${FLARE_ALTERNATE_STEPS:-20000}" | tee "$OUT/launch-costs-alternate.txt" \
      || fail "launch costs: alternate (bench/gpu_cupti_alternate.py)"
  fi
  if [[ ",$workloads," == *",flare-alternate,"* ]]; then
    : > "$OUT/launch-costs-flare-alternate.txt"
    for mode in standard light; do
      PYTHONUNBUFFERED=1 python3 bench/gpu_cupti_alternate.py --flare-trace "$flare" \
        "$work/flare-alternate" "${FLARE_ALTERNATE_STEPS:-20000}" --flare-mode "$mode" \
        | tee -a "$OUT/launch-costs-flare-alternate.txt" \
        || fail "launch costs: flare-alternate $mode (bench/gpu_cupti_alternate.py)"
    done
  fi
else
  fail "cc cupti_bare_inject"
fi
