# gpu-check-triggered.sh: part "triggered" of scripts/gpu-check.sh (sourced
# there; uses its $flare, $work, $OUT and fail). Rules whose action is
# `replay` on the H200 (issue 23, docs/rules.md "Actions"):
# tests/gpu/rules_phases.py runs a storm of tiny kernels, then fp32 8192^3
# matmuls of about 21.6 ms: a kernel-duration rule with action replay must
# replay exactly one launch, of the matmul's kernel, with the full counter
# set; a launch-rate rule with action replay, firing in the storm, must
# replay the kernel with the most GPU time there. tests/gpu/check_triggered.py
# checks the sessions. Must never leave a session behind in $OUT.
echo "== triggered: rules with action replay"
triggered_out="$OUT/triggered.txt"
: > "$triggered_out"
# run_triggered NAME PHASES EXPECTED_FRAGMENT RULE
run_triggered() {
  local name=$1 phases=$2 expected=$3 rule=$4
  local session="$work/triggered-$name"
  rm -rf "$session"
  local t0=$EPOCHREALTIME
  "$flare" trace -q -o "$session" --deep-when "$rule" -- \
    python3 tests/gpu/rules_phases.py "$phases" "$session/phases.json" >>"$work/triggered.log" 2>&1 \
    || { fail "triggered $name: program exit status"; tail -5 "$work/triggered.log"; return; }
  echo "-- $name: $rule ($(awk "BEGIN {print $EPOCHREALTIME - $t0}") s)" | tee -a "$triggered_out"
  python3 tests/gpu/check_triggered.py "$session" "$expected" | tee -a "$triggered_out" ||
    fail "triggered $name"
}
run_triggered duration "idle:1,storm:2,idle:1,heavy:3,idle:1" gemm \
  "kernel_duration_p99 > 10ms for 300ms over 1s deep_for 5s max_windows 1 action replay"
run_triggered rate "idle:1,storm:3,idle:1" "" \
  "kernel_launch_rate > 10000/s for 300ms over 1s deep_for 5s max_windows 1 action replay"
