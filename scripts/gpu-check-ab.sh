# gpu-check-ab.sh: part "ab" of scripts/gpu-check.sh (sourced there; uses its
# $flare, $work, $OUT, cmake_extra and fail). A refactor must not move the
# numbers: this builds a base version of flare beside the current one and runs
# bench/gpu_ab.py, the traced PyTorch training loop under each, alternating.
# The base comes as a source archive, because the device copy has no git
# history: make it here first with
#   mkdir -p .ab-base && git archive -o .ab-base/base.tar <commit>
# and carry .ab-base to the device. It must never touch the current build.
echo "== A/B against the base build (.ab-base/base.tar)"
if [ ! -f .ab-base/base.tar ]; then
  fail "ab: .ab-base/base.tar missing (see scripts/gpu-check-ab.sh)"
else
  ab_src="$work/ab-base-src"
  rm -rf "$ab_src" && mkdir -p "$ab_src" && tar -xf .ab-base/base.tar -C "$ab_src"
  if cmake -S "$ab_src" -B "$ab_src/build" -DCMAKE_BUILD_TYPE=Release -DFLARE_BUILD_TESTS=OFF \
      "${cmake_extra[@]}" >"$work/ab-cmake.log" 2>&1 &&
     cmake --build "$ab_src/build" -j"$(nproc)" >"$work/ab-build.log" 2>&1; then
    python3 bench/gpu_ab.py "$ab_src/build/bin/flare" "$flare" "$work" "$build/gpu/launch_storm" \
      "${FLARE_AB_ROUNDS:-5}" \
      | tee "$OUT/gpu_ab.txt" || fail "ab benchmark"
  else
    tail -30 "$work/ab-build.log" "$work/ab-cmake.log"
    fail "ab: base build"
  fi
fi
