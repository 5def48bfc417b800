# gpu-check-soak.sh: part "soak" of scripts/gpu-check.sh (sourced there; uses
# its $flare, $work, $OUT and fail). A long launch-bound PyTorch run under the
# default mode with the flight recorder's --max-size (tests/gpu/soak.py):
# database size under the cap, resident memory flat, drops counted, CPU time
# of flare's threads. FLARE_SOAK_SECONDS (default 600) and FLARE_SOAK_CAP
# (default 256M). Must never change the build.
echo "== soak: ${FLARE_SOAK_SECONDS:-600} s of PyTorch training under --max-size ${FLARE_SOAK_CAP:-256M}"
python3 tests/gpu/soak.py "$flare" "$work" "${FLARE_SOAK_SECONDS:-600}" "${FLARE_SOAK_CAP:-256M}" \
  | tee "$OUT/soak.txt" || fail "soak"
grep -q "OVER" "$OUT/soak.txt" && fail "soak: a target was missed"
