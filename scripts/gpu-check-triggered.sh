# gpu-check-triggered.sh: part "triggered" of scripts/gpu-check.sh (sourced
# there; uses its $flare, $work, $OUT and fail). Rules whose action is
# `replay` or `range` on the H200 (issue 23, docs/rules.md "Actions"), each
# run's record read from the session's triggered_replays table (schema 10):
# * tests/gpu/rules_phases.py runs a storm of tiny kernels, then fp32 8192^3
#   matmuls of about 21.6 ms: a kernel-duration rule with action replay must
#   replay exactly one launch, of the matmul's kernel, with the full counter
#   set; a launch-rate rule with action replay, firing in the storm, must
#   replay the kernel with the most GPU time there (tests/gpu/check_triggered.py).
# * slowphase: tests/gpu/slow_phase.py (deterministic; steps 25-49 run
#   21.6 ms matmuls) untraced, then FLARE_TRIGGERED_ROUNDS times (default 5)
#   under a kernel-duration rule with action replay: one replayed launch of
#   the slow kernel, inside the phase, outputs bit-identical to the untraced
#   run; then `flare replay --kernel '^NAME$' --launch N` of the same launch
#   (N counted from the kernels table, tests/gpu/check_triggered_more.py
#   says how): same outputs, every metric beside the triggered replay's,
#   speed-of-light metrics within FLARE_TRIGGERED_TOLERANCE_PCT (default 2).
# * range: the same program under a rule with `action range step`: one
#   replayed span with kernels, outputs bit-identical.
# * latency: rule firing to the launch taken and to its metrics queued,
#   median and worst over every triggered run of the part.
# * bench/gpu_replay_ready.py: the cost of a replay-ready trace whose rule
#   never fires, on the launch-bound loop (FLARE_REPLAY_READY_ROUNDS, default
#   9, within FLARE_REPLAY_READY_BUDGET_S, default 200 s; FLARE_REPLAY_READY_STEPS, default 2000).
# Summaries go to $OUT/triggered.txt, programs' output to
# $work/triggered.log. Must never leave a session behind in $OUT (every
# session is made under $work).
echo "== triggered: rules with action replay and range"
triggered_out="$OUT/triggered.txt"
: > "$triggered_out"
triggered_log="$work/triggered.log"
triggered_sessions=()
triggered_started=$EPOCHREALTIME
# triggered_seconds T0: seconds since T0 (an $EPOCHREALTIME), one decimal.
triggered_seconds() { awk "BEGIN {printf \"%.1f\", $EPOCHREALTIME - $1}"; }
# run_triggered NAME PHASES EXPECTED_FRAGMENT RULE
run_triggered() {
  local name=$1 phases=$2 expected=$3 rule=$4
  local session="$work/triggered-$name"
  rm -rf "$session"
  local t0=$EPOCHREALTIME
  timeout -k 10 180 "$flare" trace -q -o "$session" --deep-when "$rule" -- \
    python3 tests/gpu/rules_phases.py "$phases" "$session/phases.json" >>"$triggered_log" 2>&1 \
    || { fail "triggered $name: program exit status"; tail -5 "$triggered_log"; return; }
  triggered_sessions+=("$session")
  echo "-- $name: $rule ($(triggered_seconds "$t0") s)" | tee -a "$triggered_out"
  python3 tests/gpu/check_triggered.py "$session" "$expected" | tee -a "$triggered_out" ||
    fail "triggered $name"
}
run_triggered duration "idle:1,storm:2,idle:1,heavy:3,idle:1" gemm \
  "kernel_duration_p99 > 10ms for 300ms over 1s deep_for 5s max_windows 1 action replay"
run_triggered rate "idle:1,storm:3,idle:1" "" \
  "kernel_launch_rate > 10000/s for 300ms over 1s deep_for 5s max_windows 1 action replay"

python3 tests/gpu/check_triggered_more.py selftest | tee -a "$triggered_out" ||
  fail "triggered: tests/gpu/check_triggered_more.py selftest"
slow_steps=${FLARE_TRIGGERED_STEPS:-60}
slow_rounds=${FLARE_TRIGGERED_ROUNDS:-5}
slow_tolerance=${FLARE_TRIGGERED_TOLERANCE_PCT:-2}
slow_rule="kernel_duration_p99 > 10ms for 200ms over 1s deep_for 5s max_windows 1 action replay"
slow_range_rule="kernel_duration_p99 > 10ms for 200ms over 1s deep_for 5s max_windows 1 action range step"
# slow_program DIR: sets slow_cmd to tests/gpu/slow_phase.py's command line,
# its files (out.sha256, times.json) in DIR.
slow_program() {
  slow_cmd=(python3 tests/gpu/slow_phase.py --steps "$slow_steps" "$1/out.sha256" "$1/times.json")
}
slow_ref="$work/triggered-untraced"
slow_target="$work/triggered-target.json"
rm -rf "$slow_ref" "$slow_target" && mkdir -p "$slow_ref"
slow_program "$slow_ref"
slow_t0=$EPOCHREALTIME
if timeout -k 10 180 "${slow_cmd[@]}" >>"$triggered_log" 2>&1; then
  echo "-- slowphase untraced: $(grep '^slow_phase:' "$triggered_log" | tail -1) ($(triggered_seconds "$slow_t0") s)" \
    | tee -a "$triggered_out"
  for slow_round in $(seq 1 "$slow_rounds"); do
    slow_session="$work/triggered-slow-$slow_round"
    rm -rf "$slow_session"
    slow_program "$slow_session"
    slow_t0=$EPOCHREALTIME
    timeout -k 10 180 "$flare" trace -q -o "$slow_session" --deep-when "$slow_rule" -- "${slow_cmd[@]}" \
      >>"$triggered_log" 2>&1 \
      || { fail "triggered slowphase $slow_round: program exit status"; tail -5 "$triggered_log"; continue; }
    triggered_sessions+=("$slow_session")
    echo "-- slowphase $slow_round/$slow_rounds: $slow_rule ($(triggered_seconds "$slow_t0") s)" \
      | tee -a "$triggered_out"
    # The first round that passes names the launch for flare replay.
    slow_option=()
    [ -e "$slow_target" ] || slow_option=(--target "$slow_target")
    python3 tests/gpu/check_triggered_more.py slowphase "$slow_session" "$slow_ref/out.sha256" \
      ${slow_option[@]+"${slow_option[@]}"} | tee -a "$triggered_out" || fail "triggered slowphase $slow_round"
  done
  if [ -e "$slow_target" ]; then
    slow_field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$slow_target" "$1"; }
    slow_regex=$(slow_field regex)
    slow_launch=$(slow_field launch)
    slow_source=$(slow_field session)
    slow_sol=$("$flare" replay --list-sets |
      awk '/^  [a-z]/ {inside = ($1 == "speed-of-light")} inside && /__/ {print $1}' | paste -sd, -)
    slow_session="$work/triggered-slow-replay"
    rm -rf "$slow_session"
    slow_program "$slow_session"
    slow_t0=$EPOCHREALTIME
    timeout -k 10 180 "$flare" replay -q -o "$slow_session" --kernel "$slow_regex" --launch "$slow_launch" \
      -- "${slow_cmd[@]}" >>"$triggered_log" 2>&1 \
      || { fail "triggered slowphase: flare replay exit status"; tail -5 "$triggered_log"; }
    echo "-- slowphase: flare replay --kernel '$slow_regex' --launch $slow_launch, beside" \
      "$(basename "$slow_source")'s triggered replay ($(triggered_seconds "$slow_t0") s)" | tee -a "$triggered_out"
    python3 tests/gpu/check_triggered_more.py compare "$slow_source" "$slow_session" \
      "$slow_ref/out.sha256" --launch "$slow_launch" --sol "$slow_sol" --tolerance "$slow_tolerance" \
      | tee -a "$triggered_out" || fail "triggered slowphase: flare replay of the same launch"
  else
    fail "triggered slowphase: no run named a launch for flare replay"
  fi

  slow_session="$work/triggered-range"
  rm -rf "$slow_session"
  slow_program "$slow_session"
  slow_t0=$EPOCHREALTIME
  if timeout -k 10 180 "$flare" trace -q -o "$slow_session" --deep-when "$slow_range_rule" -- \
      "${slow_cmd[@]}" >>"$triggered_log" 2>&1; then
    triggered_sessions+=("$slow_session")
    echo "-- range: $slow_range_rule ($(triggered_seconds "$slow_t0") s)" | tee -a "$triggered_out"
    python3 tests/gpu/check_triggered_more.py range "$slow_session" "$slow_ref/out.sha256" \
      | tee -a "$triggered_out" || fail "triggered range"
  else
    fail "triggered range: program exit status"
    tail -5 "$triggered_log"
  fi
else
  fail "triggered slowphase: the untraced run failed"
  tail -5 "$triggered_log"
fi

if [ ${#triggered_sessions[@]} -gt 0 ]; then
  python3 tests/gpu/check_triggered_more.py latency "${triggered_sessions[@]}" | tee -a "$triggered_out" \
    || fail "triggered: latency"
fi

PYTHONUNBUFFERED=1 python3 bench/gpu_replay_ready.py "$flare" "$work" "${FLARE_REPLAY_READY_ROUNDS:-9}" \
  "${FLARE_REPLAY_READY_STEPS:-2000}" "${FLARE_REPLAY_READY_BUDGET_S:-200}" | tee -a "$triggered_out" \
  || fail "triggered: bench/gpu_replay_ready.py"
echo "-- triggered: $(triggered_seconds "$triggered_started") s in all" | tee -a "$triggered_out"
