# gpu-check-views.sh: part "views" of scripts/gpu-check.sh (sourced there; uses
# its $flare, $build, $work, $OUT and fail). What a user sees of real H200
# sessions: a PyTorch training loop traced with a rule-opened deep window (PM
# samples attributed to its NVTX steps) and a range replay of a PyTorch
# step, each exported to Perfetto (gzip, checked against the Trace Event
# Format by tests/cli/perfetto_check.py) and written as an HTML report. The
# .json.gz and .html files come back in $OUT to be opened (and
# screenshotted) where a browser is. Must never change the build.
echo "== views: Perfetto export and HTML report of H200 sessions"
views="$work/views"
rm -rf "$views" && mkdir -p "$views"
"$flare" trace -q -o "$views/train" --deep-when "kernel_launch_rate > 2000/s for 200ms deep_for 500ms max_windows 1" -- \
  python3 tests/gpu/train.py 1500 >/dev/null || fail "views: traced training"
CUBLAS_WORKSPACE_CONFIG=:4096:8 FLARE_PM=0 "$flare" replay -q -o "$views/span" --range step \
  --set speed-of-light -- python3 tests/gpu/train_step.py --steps 6 --mark 4 >/dev/null \
  || fail "views: range replay"
for session in train span; do
  dir="$views/$session"
  [ -f "$dir/session.db" ] || continue
  python3 - "$dir/session.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
for table in ("kernels", "copies", "api_calls", "scopes", "pm_samples", "windows", "storms",
              "replay_launches", "replay_metrics"):
    print("  %-16s %d" % (table, db.execute("SELECT COUNT(*) FROM %s" % table).fetchone()[0]))
PY
  t0=$EPOCHREALTIME
  "$flare" export "$dir" --format perfetto -o "$OUT/$session.json.gz" || fail "views: export $session"
  t1=$EPOCHREALTIME
  "$flare" export "$dir" --format perfetto -o "$views/$session.json" || fail "views: export $session (plain)"
  python3 tests/cli/perfetto_check.py "$views/$session.json" --gz "$OUT/$session.json.gz" \
    --db "$dir/session.db" || fail "views: $session trace format"
  t2=$EPOCHREALTIME
  "$flare" report --html "$OUT/$session.html" "$dir" || fail "views: html $session"
  t3=$EPOCHREALTIME
  echo "$session: export.json.gz $(stat -c %s "$OUT/$session.json.gz") B (plain $(stat -c %s "$views/$session.json") B) in $(awk "BEGIN {print $t1 - $t0}") s; html $(stat -c %s "$OUT/$session.html") B in $(awk "BEGIN {print $t3 - $t2}") s"
done
