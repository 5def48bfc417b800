#!/usr/bin/env bash
# GPU checks, run on a machine with an NVIDIA GPU (the H200 test machine):
# builds flare there, shows `flare info`, runs the CUDA C programs of
# tests/gpu/ under `flare trace` and checks their databases exactly, traces a
# PyTorch training loop, and runs the overhead benchmarks. Logs and results
# go to $OUT (default ./gpu-check-out).
#
# usage: scripts/gpu-check.sh [PART[,PART...]]   (default all: checks, bench, pm,
#        replay, span). Parts: checks (CUDA C and PyTorch programs under
#        flare trace, checked exactly, the storm guard's accounting among them; exit status; short programs exit
#        cleanly); bench (overhead benchmarks); storm (the launch-storm
#        guard's accounting, then the CUDA C and PyTorch launch storms with a
#        per-feature breakdown); storm-precise (the CUDA C storm alone, more
#        rounds, with bare CUPTI's storm state beside it); storm-long (the 1,000,000-launch storm alone,
#        FLARE_STORM_ROUNDS rounds); floors (bare CUPTI's range profiler
#        and launch callbacks: what the speed targets stand on); costs (bare CUPTI's cost
#        per launch and per restore, no flare: bench/gpu_cupti_costs.py,
#        replay_baselines copy-cost); pm (PM sampling,
#        scripts/gpu-check-pm.sh); replay (kernel replay against ncu,
#        scripts/gpu-check-replay.sh); span (range replay against ncu,
#        scripts/gpu-check-span.sh); hang (the PyTorch range-replay hang
#        diagnosis); multi (needs 2+ GPUs, scripts/gpu-check-multi.sh); ab (the
#        traced training loop under a base build and this one, scripts/gpu-check-ab.sh);
#        rules (every rule metric family on its own phase, scripts/gpu-check-rules.sh);
#        graphs (CUDA graphs traced, attributed and declined by replay, scripts/gpu-check-graphs.sh);
#        apicalls (what recording API calls costs, bench/gpu_api_calls.py);
#        views (Perfetto export and HTML report of H200 sessions, scripts/gpu-check-views.sh);
#        soak (a long launch-bound run under --max-size, scripts/gpu-check-soak.sh);
#        modes (known_work under --mode light, a storm under --mode full; also in checks);
#        launchcosts (where each launch's cost goes: flare's modes, bare CUPTI and
#        torch.profiler, scripts/gpu-check-launchcosts.sh);
#        fleet (two ranks under torchrun: one session, a session per rank,
#        flare merge, synchronized windows; scripts/gpu-check-fleet.sh);
#        triggered (rules with action replay and range, outputs bit-identical, beside flare replay, their latency, the cost of a replay-ready trace; scripts/gpu-check-triggered.sh);
#        replayready (that cost alone, more rounds: the CUDA C storm, then the loop;
#        scripts/gpu-check-replayready.sh); pmaccuracy (PM samples integrated per kernel
#        against the range profiler, scripts/gpu-check-pmaccuracy.sh); pmreplay (range replay
#        by PM sampling, flare replay --method pm, on a 500-512-kernel PyTorch step against the
#        range profiler, range replay and ncu: issue 25's target, scripts/gpu-check-pmreplay.sh;
#        about 3-8 min); pcprobe (CUPTI's
#        PC sampling alone, no flare: scripts/gpu-check-pcprobe.sh); pcwindow (flare's
#        PC-sampling deep window on a known hot loop and on a PyTorch program, checked:
#        scripts/gpu-check-pcwindow.sh); enginecost (each deep engine's cost prepared but idle
#        and with its window open, paired against tracing only: bench/gpu_engine_cost.py); auto
#        (engine auto's choice on the GPU: pc, pm under a small budget, refused in a storm;
#        scripts/gpu-check-auto.sh); sassprobe (CUPTI's SASS metrics alone, no flare:
#        scripts/gpu-check-sassprobe.sh); sasswindow (flare's SASS metrics deep window on the
#        hot loop, a refused metric, a PyTorch window: scripts/gpu-check-sasswindow.sh);
#        sassbisect (which of flare's pieces keeps SASS counts at 0: the bare probe with
#        flare's metrics and activity tracing, flare with pieces off:
#        scripts/gpu-check-sassbisect.sh); pcidle (PC sampling enabled but idle on tiny
#        launches, CUPTI's floor in one process beside flare's pc-idle against trace-timed,
#        in ns per launch: scripts/gpu-check-pcidle.sh); sasstext (the SASS text of
#        instructions without a source line: the hot loop built without -lineinfo under a pc
#        and a sass window, flare disasm afterwards: scripts/gpu-check-sasstext.sh); pmswitch
#        (CUPTI's PM sampling alone, no flare: what switching the configuration between passes
#        costs with one enable kept and with disable + enable, and what building each image
#        costs: scripts/gpu-check-pmswitch.sh). Any
#        other word (e.g. none) only builds and runs `flare info`.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-check-out}
# Sessions are made in a scratch folder and packed into one archive at the
# end: the device tool brings back at most 8 files from $OUT.
work=${FLARE_GPU_WORK:-/tmp/flare-gpu-check}
rm -rf "$work"
mkdir -p "$OUT" "$work"
what=${1:-all}
log="$OUT/gpu-check.log"
exec > >(tee -a "$log") 2>&1
status=0
fail() { echo "FAIL: $*"; status=1; }
# wants PART: whether PART was asked for (all, or named in the comma list).
wants() { [ "$what" = all ] || [[ ",$what," == *",$1,"* ]]; }
# gpu_sql DB SQL...: each statement's rows, one per line, fields joined by " | "
# (python3's sqlite3, read-only: the machine may have no sqlite3 program).
gpu_sql() {
  python3 - "$@" <<'PY'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
for statement in sys.argv[2:]:
    for row in db.execute(statement):
        print(" | ".join(str(v) for v in row))
PY
}

echo "== environment ($(date -u))"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || fail "nvidia-smi"
nvcc --version | tail -1
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' || true

# CUPTI is not on the default library path there.
for dir in /usr/local/cuda-13.0/targets/x86_64-linux/lib /usr/local/cuda/extras/CUPTI/lib64; do
  [ -e "$dir/libcupti.so" ] && export LD_LIBRARY_PATH="$dir:${LD_LIBRARY_PATH:-}" && break
done

echo "== build"
deps=/tmp/flare-deps
cmake_extra=()
if ! echo '#include <sqlite3.h>' | cc -E - >/dev/null 2>&1 ||
   ! echo '#include <zlib.h>' | cc -E - >/dev/null 2>&1; then
  # No SQLite headers on that image: use the Debian packages carried in
  # .device-deps/ (made by scripts/fetch-device-deps.sh), unpacked aside.
  mkdir -p "$deps"
  for deb in .device-deps/*.deb; do dpkg -x "$deb" "$deps"; done
  export PKG_CONFIG_PATH="$deps/usr/lib/x86_64-linux-gnu/pkgconfig"
  export PKG_CONFIG_SYSROOT_DIR="$deps"
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  cmake_extra+=(-DCMAKE_C_FLAGS="-I$deps/usr/include" -DCMAKE_PREFIX_PATH="$deps/usr")
fi
build=build/gpu
# Build logs stay in $work unless the build fails (the device tool brings
# back at most 8 files from $OUT).
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DFLARE_BUILD_TESTS=OFF "${cmake_extra[@]}" \
  >"$work/cmake.log" 2>&1 || { cp "$work/cmake.log" "$OUT/"; cat "$work/cmake.log"; fail "cmake"; exit 1; }
cmake --build "$build" -j"$(nproc)" >"$work/build.log" 2>&1 ||
  { cp "$work/build.log" "$OUT/"; tail -50 "$work/build.log"; fail "build"; exit 1; }
flare="$PWD/$build/bin/flare"
mkdir -p "$build/gpu"
for program in known_work launch_storm other_subscriber fork_exit; do
  nvcc -O2 -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/$program" "tests/gpu/$program.cu" -ldl \
    || fail "nvcc $program"
done

echo "== flare info"
"$flare" info
"$flare" info --json > "$OUT/info.json" && python3 -c "import json,sys; d=json.load(open('$OUT/info.json')); assert d['devices'], 'no devices'; print('info.json ok:', d['devices'][0]['name'], d['devices'][0]['chip'])" || fail "flare info --json"

if wants checks; then
  echo "== known_work under flare trace"
  rm -rf "$work/known_work"
  "$flare" trace -o "$work/known_work" -- "$build/gpu/known_work" || fail "known_work exit status"
  python3 tests/gpu/check_session.py known_work "$work/known_work" || fail "known_work database"
  "$flare" report "$work/known_work" | tee "$OUT/known_work-report.txt"

  echo "== exit status passes through, injection confirmed"
  "$flare" trace -q -o "$work/exit3" -- sh -c "$build/gpu/known_work >/dev/null && exit 3"
  [ $? -eq 3 ] || fail "exit status not passed through"

  echo "== short programs exit cleanly while flare's set-up threads are still in CUPTI (10 runs)"
  # known_work exits within the ~0.8 s PM sampling set-up; exiting under
  # that thread crashed the program (SIGSEGV at exit) before flare waited.
  crashes=0
  for run in 1 2 3 4 5 6 7 8 9 10; do
    "$flare" trace -q -o "$work/short-$run" -- "$build/gpu/known_work" >/dev/null 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || { crashes=$((crashes + 1)); echo "run $run exited $rc"; }
    rm -rf "$work/short-$run"
  done
  echo "short runs that failed: $crashes of 10"
  [ "$crashes" -eq 0 ] || fail "short programs crashed or failed at exit under flare trace"

  echo "== a child forked without exec exits at once (inherited exit handlers)"
  timeout -k 5 60 "$flare" trace -q -o "$work/fork" -- "$build/gpu/fork_exit" || fail "fork_exit under flare trace"

  echo "== another CUPTI subscriber in the process: degraded, program unharmed"
  "$flare" trace -q -o "$work/other" -- "$build/gpu/other_subscriber" || fail "other_subscriber exit status"
  python3 tests/gpu/check_session.py other_subscriber "$work/other" || fail "other_subscriber database"

  # 800 ms in: after the program's CUDA start-up (over 350 ms on the H200
  # x2), well inside its 1.5 s storm.
  echo "== a scheduled deep window during a CUDA launch storm"
  "$flare" trace -q -o "$work/window" --deep-after 800ms --deep-for 300ms -- "$build/gpu/launch_storm" 400000 \
    || fail "window run exit status"
  python3 tests/gpu/check_session.py window "$work/window" || fail "window database"

  echo "== a launch-rate rule opens one window during a CUDA launch storm"
  "$flare" trace -q -o "$work/rule" \
    --deep-when 'kernel_launch_rate > 20000/s for 200ms over 200ms deep_for 300ms max_windows 1' \
    -- "$build/gpu/launch_storm" 400000 || fail "rule run exit status"
  python3 tests/gpu/check_session.py rule "$work/rule" || fail "rule database"

  echo "== PyTorch training loop under flare trace"
  rm -rf "$work/train"
  "$flare" trace -o "$work/train" -- python3 tests/gpu/train.py 50 || fail "train.py exit status"
  python3 tests/gpu/check_session.py train "$work/train" 50 || fail "train database"
  "$flare" report --top 8 "$work/train" > "$OUT/train-report.txt"
  head -40 "$OUT/train-report.txt"
fi

if wants checks || wants modes; then
  # flare trace --mode (issue 22): the light mode records the same GPU work
  # and NVTX ranges without launch callbacks; the full mode times every
  # launch of a storm.
  echo "== modes: known_work under --mode light, a launch storm under --mode full"
  "$flare" trace -q -o "$work/light" --mode light -- "$build/gpu/known_work" >/dev/null \
    || fail "known_work --mode light exit status"
  python3 tests/gpu/check_session.py known_work_light "$work/light" || fail "known_work --mode light database"
  "$flare" trace -q -o "$work/full" --mode full -- "$build/gpu/launch_storm" 200000 \
    || fail "launch_storm --mode full exit status"
  python3 tests/gpu/check_session.py storm_full "$work/full" 201000 || fail "launch_storm --mode full database"
fi

# Builds the bare-CUPTI probes (no flare in them): replay_baselines (CUPTI's
# kernel replay, its range profiler alone, the checkpoint API; used by the
# costs, floors, replay and span parts) and cupti_launch_cost (costs, floors).
build_replay_baselines() {
  cupti_lib=$(dirname "$(ls /usr/local/cuda*/targets/*/lib/libcupti.so /usr/local/cuda/lib64/libcupti.so 2>/dev/null | head -1)")
  checkpoint_lib=$(dirname "$(ls /usr/local/cuda*/lib*/libcheckpoint.so /usr/local/cuda*/targets/*/lib/libcheckpoint.so 2>/dev/null | head -1)" 2>/dev/null)
  nvcc -O2 -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/replay_baselines" tests/gpu/replay_baselines.cu \
    -L"$cupti_lib" -L"${checkpoint_lib:-$cupti_lib}" -L/usr/local/cuda/lib64/stubs -lcupti -lcheckpoint -lcuda \
    -Xlinker -rpath -Xlinker "$cupti_lib" -Xlinker -rpath -Xlinker "${checkpoint_lib:-$cupti_lib}" \
    || fail "nvcc replay_baselines"
}
build_cupti_probes() {
  build_replay_baselines
  nvcc -O2 -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/cupti_launch_cost" bench/cupti_launch_cost.cu \
    -L"$cupti_lib" -L/usr/local/cuda/lib64/stubs -lcupti -lcuda -Xlinker -rpath -Xlinker "$cupti_lib" \
    || fail "nvcc cupti_launch_cost"
}

# Builds bench/cupti_bare_inject.c (bare CUPTI injected into any CUDA
# program, no flare) into $build/gpu/libcupti_bare_inject.so; used by the
# launchcosts and soak parts.
build_bare_inject() {
  cupti_lib=${cupti_lib:-$(dirname "$(ls /usr/local/cuda*/targets/*/lib/libcupti.so /usr/local/cuda/lib64/libcupti.so 2>/dev/null | head -1)")}
  cc -std=c11 -O2 -Wall -Wextra -fPIC -shared -I/usr/local/cuda/include \
    -o "$build/gpu/libcupti_bare_inject.so" bench/cupti_bare_inject.c \
    -L"$cupti_lib" -lcupti -lpthread -ldl -Wl,-rpath,"$cupti_lib"
}

if [[ ",$what," == *",costs,"* ]]; then
  # What bare CUPTI costs per launch, and what one restore costs, with no
  # flare in the process: the floors the storm and restore targets meet.
  echo "== bare CUPTI costs: per launch, per restore"
  build_cupti_probes
  # FLARE_COSTS_CONFIGS=a,b,...: only those launch configurations, and no
  # restore costs (a quick look at one question).
  python3 bench/gpu_cupti_costs.py "$build/gpu/cupti_launch_cost" "${FLARE_COSTS_ROUNDS:-5}" \
    ${FLARE_COSTS_CONFIGS:+"$FLARE_COSTS_CONFIGS"} > "$OUT/cupti-costs.txt" || fail "bare CUPTI launch costs"
  [ -n "${FLARE_COSTS_CONFIGS:-}" ] || for size in 64 256; do
    timeout -k 10 120 "$build/gpu/replay_baselines" copy-cost $size >> "$OUT/cupti-costs.txt" || fail "copy-cost $size"
  done
  cat "$OUT/cupti-costs.txt"
fi

if [[ ",$what," == *",floors,"* ]]; then
  # The floors under the speed targets, from bare CUPTI in processes without
  # flare: the range profiler in user-replay mode with automatic ranges over
  # the speed-of-light set (1 kernel, as kernel replay; 58, as the PyTorch
  # step of range replay), whether its one-time cost can be paid by a warm-up
  # that profiles nothing, and the per-launch cost of each callback set-up
  # over more rounds (FLARE_FLOOR_ROUNDS, default 11).
  echo "== floors: the range profiler alone, launch callbacks alone"
  build_cupti_probes
  sol=$("$flare" replay --list-sets | awk '/^  [a-z]/ {inside = ($1 == "speed-of-light")} inside && /__/ {print $1}' | paste -sd, -)
  echo "speed-of-light: $sol"
  {
    for warm in none warm warm-reenable none; do
      timeout -k 10 120 "$build/gpu/replay_baselines" range-floor "$sol" 1 3 $warm || fail "range-floor 1 $warm"
    done
    for kernels in 58 58 16; do
      timeout -k 10 120 "$build/gpu/replay_baselines" range-floor "$sol" $kernels 2 none || fail "range-floor $kernels"
    done
  } | tee "$OUT/floors.jsonl"
  python3 bench/gpu_cupti_costs.py "$build/gpu/cupti_launch_cost" "${FLARE_FLOOR_ROUNDS:-11}" \
    subscribe,callback,callback_runtime,flare_storm_all_off,flare_storm_runtime | tee "$OUT/floor-costs.txt" \
    || fail "bare CUPTI launch costs"
fi

if wants checks || [[ ",$what," == *",storm,"* ]]; then
  echo "== the launch-storm guard: 200,000 launches (+1,000 warm-up), every one accounted for"
  "$flare" trace -q -o "$work/storm-guard" -- "$build/gpu/launch_storm" 200000 || fail "storm guard run exit status"
  python3 tests/gpu/check_session.py storm "$work/storm-guard" 201000 || fail "storm guard database"
  grep -h "launch storm" "$work/storm-guard/flare.log" | head -4
fi

if [[ ",$what," == *",storm,"* ]]; then
  python3 bench/gpu_overhead.py "$flare" "$PWD/$build" "$work" 5 storm | tee "$OUT/gpu_overhead.txt" \
    || fail "storm benchmark"
fi

if [[ ",$what," == *",storm-precise,"* ]]; then
  # flare's storm state resolved to a few percent: the CUDA C storm alone,
  # more rounds (FLARE_STORM_ROUNDS, default 15), flare against tracing with
  # nothing enabled; then bare CUPTI's storm state against no CUPTI, and in
  # one process (blocks of launches under each launch-counting state).
  python3 bench/gpu_overhead.py "$flare" "$PWD/$build" "$work" "${FLARE_STORM_ROUNDS:-15}" storm-c \
    | tee "$OUT/storm-precise.txt" || fail "storm-precise benchmark"
  build_cupti_probes
  python3 bench/gpu_cupti_costs.py "$build/gpu/cupti_launch_cost" "${FLARE_STORM_ROUNDS:-15}" \
    flare_storm_all_off,flare_storm_no_callbacks | tee -a "$OUT/storm-precise.txt" || fail "bare storm costs"
  "$build/gpu/cupti_launch_cost" alternate 20000 15 2>/dev/null | tee -a "$OUT/storm-precise.txt" \
    || fail "bare alternate"
fi

if [[ ",$what," == *",storm-long,"* ]]; then
  # The guard's steady state alone, more rounds (FLARE_STORM_ROUNDS, default 6).
  python3 bench/gpu_overhead.py "$flare" "$PWD/$build" "$work" "${FLARE_STORM_ROUNDS:-6}" storm-long \
    | tee "$OUT/gpu_overhead_long.txt" || fail "long storm benchmark"
fi

if [[ ",$what," == *",apicalls,"* ]]; then
  # What recording API calls costs: untraced, off and on, paired rounds.
  echo "== API call recording cost (paired)"
  python3 bench/gpu_api_calls.py "$flare" "$work" "$build/gpu/launch_storm" \
    "${FLARE_API_ROUNDS:-5}" "${FLARE_API_LAUNCHES:-200000}" \
    | tee "$OUT/gpu_api_calls.txt" || fail "API call benchmark"
fi

if [[ ",$what," == *",enginecost,"* ]]; then
  # Each deep engine's cost prepared-but-idle and with its window open, paired
  # against tracing only (issue 26: the table `auto` is to use).
  echo "== deep engines' cost (paired): bench/gpu_engine_cost.py on pm_window bench"
  mkdir -p "$build/gpu"
  if nvcc -O2 -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/pm_window" tests/gpu/pm_window.cu -ldl; then
    PYTHONUNBUFFERED=1 python3 bench/gpu_engine_cost.py "$flare" "$build/gpu/pm_window" "$work" \
      "${FLARE_ENGINE_COST_ROUNDS:-5}" | tee "$OUT/gpu_engine_cost.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || fail "engine cost benchmark"
  else
    fail "enginecost: nvcc pm_window"
  fi
fi

if wants bench; then
  echo "== overhead benchmarks (paired)"
  python3 bench/gpu_overhead.py "$flare" "$PWD/$build" "$work" 5 || fail "overhead benchmark"
  cp "$work/gpu_overhead.txt" "$OUT/" 2>/dev/null
  rm -rf "$work/bench-sessions"
fi

# The PM-sampling and replay checks live in their own files, sourced here so
# they share the build, $flare, $work, $OUT and fail().
for part in pcwindow auto pm replay span hang multi ab rules graphs views launchcosts soak fleet triggered \
            replayready pmaccuracy pmreplay pcprobe sassprobe sasswindow sassbisect pcidle sasstext pmswitch; do
  if { [ "$what" = all ] && [ "$part" != hang ] && [ "$part" != multi ] && [ "$part" != ab ] &&
       [ "$part" != soak ] && [ "$part" != launchcosts ] && [ "$part" != fleet ] &&
       [ "$part" != replayready ] && [ "$part" != pmaccuracy ] && [ "$part" != pmreplay ] &&
       [ "$part" != pcprobe ] &&
       [ "$part" != sassprobe ] && [ "$part" != pcwindow ] && [ "$part" != auto ] &&
       [ "$part" != sasswindow ] && [ "$part" != sassbisect ] && [ "$part" != pcidle ] &&
       [ "$part" != sasstext ] && [ "$part" != pmswitch ]; } ||
     [[ ",$what," == *",$part,"* ]]; then
    if [ -f "scripts/gpu-check-$part.sh" ]; then
      . "scripts/gpu-check-$part.sh"
    else
      fail "scripts/gpu-check-$part.sh missing"
    fi
  fi
done

rm -rf "$work/exit3"
echo "== done: status $status"
exit $status
