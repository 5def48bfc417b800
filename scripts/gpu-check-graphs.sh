# gpu-check-graphs.sh: part "graphs" of scripts/gpu-check.sh (sourced there;
# uses its $flare, $build, $work, $OUT and fail). CUDA graphs traced and
# attributed: tests/gpu/graph_work.cu (a captured graph of known kernels and
# copies launched N times) and tests/gpu/torch_graphs.py (a
# torch.cuda.CUDAGraph replayed under NVTX ranges), checked exactly by
# tests/gpu/check_graphs.py; kernel and range replay decline graph launches;
# the launch-storm guard on a storm of graph launches. Must never leave a
# session in $OUT.
echo "== graphs: CUDA graphs traced, attributed, declined by replay"
graphs_out="$OUT/graphs.txt"
: > "$graphs_out"
nvcc -O2 -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/graph_work" tests/gpu/graph_work.cu -ldl \
  || fail "nvcc graph_work"
g="$work/graphs"
rm -rf "$g" && mkdir -p "$g"
{
  "$flare" trace -q -o "$g/c" -- "$build/gpu/graph_work" 50 || fail "graph_work under flare trace"
  python3 tests/gpu/check_graphs.py c "$g/c" 50 || fail "graph_work database"
  "$flare" report "$g/c" > "$g/c-report.txt" 2>&1
  sed -n '/^CUDA graphs/,/^$/p' "$g/c-report.txt"
  grep -q "graphs x50" "$g/c-report.txt" || fail "the report does not group the graph under its range"

  "$flare" trace -q -o "$g/torch" -- python3 tests/gpu/torch_graphs.py 20 || fail "torch_graphs under flare trace"
  python3 tests/gpu/check_graphs.py torch "$g/torch" 20 || fail "torch_graphs database"
  "$flare" report "$g/torch" 2>&1 | sed -n '/^CUDA graphs/,/^$/p'

  "$flare" replay -q -o "$g/replay" --kernel . --metrics gpu__time_duration.sum -- "$build/gpu/graph_work" 5 \
    || fail "graph_work under flare replay"
  python3 tests/gpu/check_graphs.py replay "$g/replay" || fail "graph launches under kernel replay"
  "$flare" replay -q -o "$g/range" --range graphs --metrics gpu__time_duration.sum -- "$build/gpu/graph_work" 5 \
    || fail "graph_work under range replay"
  python3 tests/gpu/check_graphs.py range "$g/range" || fail "graph launches under range replay"

  echo "-- a storm of graph launches (20 tiny kernels each): untraced, then traced"
  "$build/gpu/graph_work" storm 20000
  "$flare" trace -q -o "$g/storm" -- "$build/gpu/graph_work" storm 20000 || fail "graph storm under flare trace"
  python3 - "$g/storm" <<'PY'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}/session.db?mode=ro", uri=True)
q = lambda sql: db.execute(sql).fetchone()[0]
launches = q("SELECT m.value FROM metrics m JOIN names n ON n.id = m.name_id WHERE n.name = "
             "'host_kernel_launches' ORDER BY m.time_ns DESC LIMIT 1")
kernels = q("SELECT COUNT(*) FROM kernels WHERE graph_id != 0")
untimed = q("SELECT COALESCE(SUM(count), 0) FROM drops WHERE source = 'storm_guard' AND detail LIKE 'kernel launches%'")
graph_rows = q("SELECT COUNT(*) FROM graph_launches")
storm = db.execute("SELECT status, reason FROM capabilities WHERE feature = 'storm_guard'").fetchone()
print(f"   host launches counted {launches} (20,001 graph launches + 20 captured), graph kernels "
      f"recorded {kernels} of {20 * 20001}, graph launches recorded {graph_rows}, guard's untimed "
      f"launches {untimed}; storm_guard {storm}")
PY
} 2>&1 | tee -a "$graphs_out"
