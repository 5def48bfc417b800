# gpu-check-hang.sh: a diagnostic, sourced by scripts/gpu-check.sh (`hang`):
# runs the PyTorch range-replay workload under flare and, if it has not
# finished after 45 s, saves every thread's stack (gdb, else eu-stack, else
# the kernel's wait channels) to $OUT/hang-stacks.txt before killing it.
echo "== hang diagnosis: PyTorch range replay"
hang_dir="$work/hang"
rm -rf "$hang_dir"; mkdir -p "$hang_dir"
export CUBLAS_WORKSPACE_CONFIG=:4096:8 FLARE_PM=0 PYTHONFAULTHANDLER=1
"$flare" replay -q -o "$hang_dir/session" --range step --set speed-of-light -- \
  python3 tests/gpu/train_step.py --steps 6 --mark 4 > "$hang_dir/out.json" 2> "$hang_dir/err.txt" &
launcher=$!
for second in $(seq 1 45); do
  kill -0 $launcher 2>/dev/null || break
  sleep 1
done
if kill -0 $launcher 2>/dev/null; then
  target=$(pgrep -P $launcher | head -1)
  echo "still running after 45 s: pid $target"
  {
    if command -v gdb >/dev/null; then
      gdb -p "$target" -batch -ex "thread apply all bt 25" 2>&1
    elif command -v eu-stack >/dev/null; then
      eu-stack -p "$target" 2>&1
    else
      for task in /proc/$target/task/*; do echo "$task $(cat $task/comm) $(cat $task/wchan)"; cat $task/stack 2>/dev/null; done
    fi
  } > "$OUT/hang-stacks.txt"
  grep -E "^#|^Thread" "$OUT/hang-stacks.txt" | grep -E "Thread|replay|span|gate|flare|cupti|cuda_|pthread" | head -60
  awk '/^\/proc/ {print}' "$OUT/hang-stacks.txt" | head -40
  # Python's own view of every thread (faulthandler prints it on SIGABRT).
  kill -ABRT "$target" 2>/dev/null
  sleep 2
  tail -60 "$hang_dir/err.txt"
  kill -9 "$target" 2>/dev/null
  fail "PyTorch range replay hung"
else
  wait $launcher; echo "finished: exit $?"; cat "$hang_dir/out.json"
fi
grep "range replay\|replay:" "$hang_dir/session/flare.log" | head
