# scripts/gpu-check-pm.sh: PM sampling on the GPU. Sourced by scripts/gpu-check.sh
# (`pm` or `all`), so it uses its $flare, $build, $work, $OUT and fail(); it must not
# exit (the caller reports the status). Builds tests/gpu/pm_window.cu, runs it under a
# launch-rate rule and checks the window's PM samples and their NVTX attribution
# (tests/gpu/check_pm.py), at the default and at the minimum interval; checks that a
# too-short FLARE_PM_INTERVAL is refused with a precise reason; and measures the
# throughput cost of a prepared-but-idle PM engine (bench/gpu_pm_overhead.py).

echo "== PM sampling: build pm_window"
nvcc -O2 -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/pm_window" tests/gpu/pm_window.cu -ldl \
  || fail "nvcc pm_window"
pm_rule='kernel_launch_rate < 500/s for 500ms over 300ms rearm 5000/s deep_for 1s max_windows 1'

echo "== PM sampling: a launch-rate rule opens a window with PM samples on NVTX ranges"
"$flare" trace -q -o "$work/pm" --deep-when "$pm_rule" -- "$build/gpu/pm_window" window \
  || fail "pm_window exit status"
python3 tests/gpu/check_pm.py "$work/pm" | tee "$OUT/pm-check.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "PM window database"
"$flare" report "$work/pm" > "$OUT/pm-report.txt" 2>&1
grep -iE "pm_|window|drop" "$OUT/pm-report.txt" | head -30

echo "== PM sampling at the minimum interval (FLARE_PM_INTERVAL=10us)"
FLARE_PM_INTERVAL=10us "$flare" trace -q -o "$work/pm10" --deep-when "$pm_rule" -- \
  "$build/gpu/pm_window" window || fail "pm_window (10us) exit status"
python3 tests/gpu/check_pm.py "$work/pm10" | tee "$OUT/pm-check-10us.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "PM window database (10us)"

echo "== PM sampling: an interval under the minimum is refused with a precise reason"
FLARE_PM_INTERVAL=5us "$flare" trace -q -o "$work/pmbad" -- "$build/gpu/pm_window" bench >/dev/null \
  || fail "pm_window (bad interval) exit status"
python3 - "$work/pmbad" <<'PY' || fail "bad FLARE_PM_INTERVAL not refused precisely"
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}/session.db?mode=ro", uri=True)
row = db.execute("SELECT status, reason FROM capabilities WHERE feature = 'pm_sampling'").fetchone()
print("pm_sampling with FLARE_PM_INTERVAL=5us:", row)
assert row and row[0] == "unavailable" and "below the minimum" in row[1], row
PY

echo "== PM sampling: prepared-but-idle engine vs tracing only (paired)"
python3 bench/gpu_pm_overhead.py "$flare" "$build/gpu/pm_window" "$work" 5 | tee "$OUT/pm-overhead.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "PM overhead benchmark"
