# gpu-check-rules.sh: part "rules" of scripts/gpu-check.sh (sourced there;
# uses its $flare, $work, $OUT and fail). Every rule metric family on the
# GPU: tests/gpu/rules_phases.py runs phases of known kinds (a decoy phase
# first, then the phase the rule is about), and tests/gpu/check_rules.py
# checks that rule 1 opened exactly one window, in its phase, within the
# allowance, that the window's PM samples belong to that phase's NVTX range,
# and that rule 2, which must never hold, never fired. Also: the same
# kernel-duration rule with FLARE_DELIVERY_MS=0 (the cause: no reading), and
# the kernel records' delivery delay over every run. Must never leave a
# session behind in $OUT (they go to $work).
echo "== rules: one GPU run per metric family"
rules_out="$OUT/rules.txt"
: > "$rules_out"
never='kernel_duration_p99 > 10s max_windows 1'
window_opts='deep_for 300ms max_windows 1'
rules_sessions=()
# run_rule NAME PHASES TARGET ALLOWANCE_MS RULE [VAR=value...]
run_rule() {
  local name=$1 phases=$2 target=$3 allowance=$4 rule=$5
  shift 5
  local session="$work/rules-$name"
  rm -rf "$session"
  env "$@" "$flare" trace -q -o "$session" --deep-when "$rule" --deep-when "$never" -- \
    python3 tests/gpu/rules_phases.py "$phases" "$session/phases.json" >>"$work/rules-programs.log" 2>&1 \
    || { fail "rules $name: program exit status"; tail -5 "$work/rules-programs.log"; return; }
  echo "-- $name: $rule" | tee -a "$rules_out"
  python3 tests/gpu/check_rules.py check "$session" "$session/phases.json" "$target" "$allowance" \
    | tee -a "$rules_out" || fail "rules $name"
  "$flare" report "$session" > "$session/report.txt" 2>&1
  grep -q "rule 1: " "$session/report.txt" && grep -q "disarmed" "$session/report.txt" \
    || fail "rules $name: the report does not show the rule's window"
  rules_sessions+=("$session")
}

gpu_decoy="idle:1,tokens:2,idle:1,heavy:3,idle:1"
kernel_decoy="idle:1,storm:2,idle:2,heavy:3,idle:1"
# Allowances: for + bucket + the delivery bound of the metric's source
# (docs/rules.md): kernel records, FLARE_DELIVERY_MS plus the kernel in
# flight; NVML gauges average over up to a second; rates and means also
# need over to fill.
run_rule launch_rate "idle:1,heavy:2,idle:2,storm:3,idle:1" 3 900 \
  "kernel_launch_rate > 20000/s for 300ms over 200ms $window_opts"
for p in p50 p90 p99; do
  run_rule "duration_$p" "$kernel_decoy" 3 900 "kernel_duration_$p > 10ms for 300ms $window_opts"
done
run_rule utilization "$gpu_decoy" 3 1800 \
  "gpu0.utilization > 80% for 300ms over 200ms $window_opts"
run_rule memory_used "idle:1,heavy:2,idle:1,memory:3,idle:1" 3 900 \
  "gpu0.memory_used > 20GiB for 300ms over 200ms $window_opts"
run_rule custom "idle:1,heavy:2,idle:1,tokens:3,idle:1" 3 900 \
  "custom.tokens > 500/s for 300ms over 200ms $window_opts"

# Power and SM clock: the thresholds come from a run without rules, since
# they depend on the GPU, its cooling and its clock policy.
session="$work/rules-baseline"
rm -rf "$session"
"$flare" trace -q -o "$session" -- python3 tests/gpu/rules_phases.py \
  "idle:1,tokens:2,idle:1,heavy:3,idle:1,tensor:3,idle:1" "$session/phases.json" \
  >>"$work/rules-programs.log" 2>&1 || fail "rules baseline run"
# The SM clock holds its maximum under fp32 load on the H200 (1980 vs 1965
# MHz): only the power limit of a tensor-core load may pull it down.
for gauge in "power power_mw 1000 W heavy" "sm_clock sm_clock_mhz 1 MHz tensor"; do
  set -- $gauge
  threshold=$(python3 tests/gpu/check_rules.py threshold "$session" "$session/phases.json" "$2" "$3" "$4" "$5" 2>>"$rules_out")
  if [ "$threshold" = none ] || [ -z "$threshold" ]; then
    echo "-- $1: the $5 phase does not move it by 3% on this GPU (medians above); not checked" | tee -a "$rules_out"
  else
    run_rule "$1" "idle:1,tokens:2,idle:1,$5:3,idle:1" 3 1800 "gpu0.$1 $threshold for 300ms over 200ms $window_opts"
  fi
done

echo "-- the cause, on the GPU: kernel_duration_p99 with FLARE_DELIVERY_MS=0" | tee -a "$rules_out"
session="$work/rules-no-delivery"
rm -rf "$session"
FLARE_DELIVERY_MS=0 "$flare" trace -q -o "$session" --deep-when "kernel_duration_p99 > 10ms for 300ms $window_opts" -- \
  python3 tests/gpu/rules_phases.py "$kernel_decoy" "$session/phases.json" >>"$work/rules-programs.log" 2>&1
python3 - "$session" <<'PY' | tee -a "$rules_out"
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}/session.db?mode=ro", uri=True)
print("   rules:", db.execute("SELECT rule_id, status, windows_fired, missing_readings FROM rules").fetchall())
PY
python3 tests/gpu/check_rules.py delays "${rules_sessions[@]}" | tee -a "$rules_out"
cp "$work/rules-programs.log" "$OUT/" 2>/dev/null
