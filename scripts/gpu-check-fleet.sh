# gpu-check-fleet.sh: part "fleet" of scripts/gpu-check.sh (sourced there;
# uses its $flare, $build, $work, $OUT and fail). Many ranks on the H200
# (issue 24, docs/fleet.md): tests/gpu/ddp_steps.py under torchrun, two
# ranks (NCCL and DistributedDataParallel on a machine with two GPUs; on one
# GPU, two independent processes sharing it), rank 1 slowed in steps 5, 9
# and 23 of 40:
#   1. `flare trace -- torchrun ...`: one session, a process per rank;
#   2. `torchrun ... flare trace -o 'runs/%r' -- ...`: a session per rank;
#   3. `flare merge` of those, reported and exported to Perfetto;
#   4. a live job of a session per rank, and `flare window open DIR --at T`
#      on each: one PM window per rank, opened within 5 ms of each other
#      (sharing one GPU, only one process can hold its PM sampling: the
#      others' windows are refused, HARDWARE_BUSY, at that same moment);
#   5. flare.fleet over the sessions where Dask is importable; the sessions
#      of 2 and 3 come back in $OUT/fleet-sessions.tar.gz to be analysed
#      where it is (the H200 image has pandas but no Dask).
# Must never change the build.
echo "== fleet: two ranks under torchrun, per-rank sessions, merge, synchronized windows"
fleet="$work/fleet"
rm -rf "$fleet" && mkdir -p "$fleet/runs" "$fleet/live"
world=2
steps=40
slow="--slow-rank 1 --slow-steps 5,9,23 --stall-ms 80"
backend=$(python3 -c "import torch; print('nccl' if torch.cuda.device_count() >= $world else 'none')")
echo "backend: $backend ($(python3 -c 'import torch; print(torch.cuda.device_count())') GPU(s))"
torchrun=(python3 -m torch.distributed.run --standalone --nproc_per_node "$world")

# 1. One session for the launcher and its ranks.
"$flare" trace -q -o "$fleet/one" -- "${torchrun[@]}" tests/gpu/ddp_steps.py --steps "$steps" \
  $slow || fail "fleet: flare trace -- torchrun"
python3 tests/gpu/check_fleet.py one "$fleet/one" "$world" "$steps" "$backend" ||
  fail "fleet: the torchrun session"
"$flare" report "$fleet/one" | sed -n 1,14p

# 2. A session per rank: torchrun starts one flare trace per rank.
"${torchrun[@]}" --no-python "$flare" trace -q -o "$fleet/runs/%r" -- \
  python3 tests/gpu/ddp_steps.py --steps "$steps" $slow || fail "fleet: torchrun flare trace -o %r"
python3 tests/gpu/check_fleet.py ranks "$world" "$steps" "$backend" "$fleet"/runs/* ||
  fail "fleet: the per-rank sessions"

# 3. Merged: one run for report, export and the HTML report.
t0=$EPOCHREALTIME
"$flare" merge -o "$fleet/merged" "$fleet/runs" || fail "fleet: flare merge"
echo "merge: $(awk "BEGIN {print $EPOCHREALTIME - $t0}") s"
python3 tests/gpu/check_fleet.py merged "$fleet/merged" "$fleet"/runs/* || fail "fleet: the merged session"
"$flare" report "$fleet/merged" | sed -n 1,14p
"$flare" export "$fleet/merged" --format perfetto -o "$OUT/fleet-merged.json.gz" ||
  fail "fleet: export of the merged session"

# 4. A live job; both sessions get one request for the same wall-clock time.
"${torchrun[@]}" --no-python "$flare" trace -q -o "$fleet/live/%r" -- \
  python3 tests/gpu/ddp_steps.py --seconds 8 $slow >"$fleet/live.log" 2>&1 &
live=$!
ready=0
for _ in $(seq 600); do # up to 60 s for both ranks' processes to be recorded
  ready=$(for rank in $(seq 0 $((world - 1))); do
    python3 - "$fleet/live/$rank/session.db" <<'PY' 2>/dev/null
import sqlite3, sys
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
print(db.execute("SELECT COUNT(*) FROM process_ranks WHERE rank IS NOT NULL").fetchone()[0])
PY
  done | awk '$1 > 0' | wc -l)
  [ "$ready" -eq "$world" ] && break
  sleep 0.1
done
if [ "$ready" -eq "$world" ]; then
  at=$(date -u -d '+3 seconds' +%Y-%m-%dT%H:%M:%S.%3NZ)
  for rank in $(seq 0 $((world - 1))); do
    "$flare" window open "$fleet/live/$rank" --at "$at" --for 300ms || fail "fleet: window open rank $rank"
  done
else
  fail "fleet: the live job's ranks were not recorded within 60 s"
fi
wait $live || { cat "$fleet/live.log"; fail "fleet: the live job"; }
tail -2 "$fleet/live.log"
"$flare" merge -o "$fleet/live-merged" "$fleet/live" || fail "fleet: flare merge (live)"
shared=$([ "$backend" = none ] && echo shared) # one GPU: one process may PM-sample it
python3 tests/gpu/check_fleet.py window "$fleet/live-merged" "$world" 5 $shared ||
  fail "fleet: synchronized windows"

# 5. The analysis, where Dask is; the sessions travel back either way.
if PYTHONPATH="$PWD/$build/python" python3 -c 'import flare, dask, distributed' 2>/dev/null; then
  PYTHONPATH="$PWD/$build/python" python3 -m flare.fleet "$fleet/runs" || fail "fleet: flare.fleet"
else
  echo "flare.fleet: not run here (no Dask, or no flare Python module); sessions in fleet-sessions.tar.gz"
fi
tar -C "$fleet" -czf "$OUT/fleet-sessions.tar.gz" one runs merged
ls -l "$OUT/fleet-sessions.tar.gz"
