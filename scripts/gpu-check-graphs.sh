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

  echo "-- a storm of graph launches (20 tiny kernels each, 200,000 launches): the guard counts"
  echo "   each launch as its 20 kernels; 3 rounds of untraced / traced / traced with the guard off"
  storm_n=200000
  : > "$g/storm-rates.txt"
  for round in 1 2 3; do
    for how in untraced traced guard-off; do
      case "$how" in
        untraced) rate=$("$build/gpu/graph_work" storm $storm_n | awk '/^kernels_per_second/ {print $2}') ;;
        traced) rm -rf "$g/storm"
                rate=$("$flare" trace -q -o "$g/storm" -- "$build/gpu/graph_work" storm $storm_n \
                       | awk '/^kernels_per_second/ {print $2}') ;;
        guard-off) rm -rf "$g/storm-off"
                rate=$("$flare" trace -q --storm-rate 0 -o "$g/storm-off" -- "$build/gpu/graph_work" storm $storm_n \
                       | awk '/^kernels_per_second/ {print $2}') ;;
      esac
      [ -n "$rate" ] || fail "graph storm ($how) printed no rate"
      echo "graph_storm round=$round how=$how kernels_per_second=$rate" | tee -a "$g/storm-rates.txt"
    done
  done
  python3 tests/gpu/check_graphs.py storm "$g/storm" $storm_n || fail "graph storm: the guard's count"
  python3 - "$g/storm-rates.txt" <<'PY'
import re, statistics, sys
rates = {}
for line in open(sys.argv[1]):
    m = re.match(r"graph_storm round=(\d+) how=(\S+) kernels_per_second=(\d+)", line)
    if m:
        rates.setdefault(m.group(2), {})[int(m.group(1))] = float(m.group(3))
base = rates["untraced"]
for how in ("traced", "guard-off"):
    ratios = [rates[how][r] / base[r] for r in base if r in rates[how]]
    print(f"   graph storm {how}/untraced: median {statistics.median(ratios):.3f} "
          f"(rounds {', '.join(f'{x:.3f}' for x in ratios)}); untraced median "
          f"{statistics.median(base.values()):,.0f} kernels/s")
PY
} 2>&1 | tee -a "$graphs_out"
