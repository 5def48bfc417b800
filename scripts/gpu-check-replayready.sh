# gpu-check-replayready.sh: part "replayready" of scripts/gpu-check.sh
# (sourced there; uses its $flare, $build, $work, $OUT and fail). What a
# trace whose rules may replay costs while no rule fires (issue 23, item 2;
# bench/gpu_replay_ready.py): first on the CUDA C storm (200,000 launches a
# run, short runs, many rounds), then on the launch-bound PyTorch loop.
# FLARE_REPLAY_READY_STORM_BUDGET_S (default 200) and
# FLARE_REPLAY_READY_LOOP_BUDGET_S (default 250) bound each. Before them, the
# launch path's cost inside one process (bench/gpu_cupti_alternate.py
# --flare-ready: flare switches the range-ready work off and on in 250 ms
# blocks while the loop runs FLARE_REPLAY_READY_ALTERNATE_STEPS steps,
# default 60000); FLARE_REPLAY_READY_CROSS=0 leaves the cross-process runs
# out. Summaries to $OUT/replay-ready.txt. Must never leave a session behind
# in $OUT.
echo "== replayready: a replay-ready trace whose rules never fire"
PYTHONUNBUFFERED=1 python3 bench/gpu_cupti_alternate.py --flare-ready "$flare" "$work/ready-alternate" \
  "${FLARE_REPLAY_READY_ALTERNATE_STEPS:-60000}" 250 | tee "$OUT/replay-ready.txt" \
  || fail "replayready: in one process (bench/gpu_cupti_alternate.py --flare-ready)"
[ "${FLARE_REPLAY_READY_CROSS:-1}" = 0 ] && return 0
FLARE_REPLAY_READY_STORM="$PWD/$build/gpu/launch_storm" PYTHONUNBUFFERED=1 \
  python3 bench/gpu_replay_ready.py "$flare" "$work" 99 200000 \
  "${FLARE_REPLAY_READY_STORM_BUDGET_S:-200}" | tee -a "$OUT/replay-ready.txt" \
  || fail "replayready: storm (bench/gpu_replay_ready.py)"
PYTHONUNBUFFERED=1 python3 bench/gpu_replay_ready.py "$flare" "$work" 99 2000 \
  "${FLARE_REPLAY_READY_LOOP_BUDGET_S:-250}" | tee -a "$OUT/replay-ready.txt" \
  || fail "replayready: loop (bench/gpu_replay_ready.py)"
