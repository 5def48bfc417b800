# gpu-check-soak.sh: part "soak" of scripts/gpu-check.sh (sourced there; uses
# its $flare, $work, $OUT and fail). A long launch-bound PyTorch run under the
# default mode with the flight recorder's --max-size (tests/gpu/soak.py):
# database size under the cap, resident memory flat, drops counted, CPU time
# of flare's threads. FLARE_SOAK_SECONDS (default 600) and FLARE_SOAK_CAP
# (default 256M); FLARE_SOAK_BESIDE=1 runs the same loop untraced beside it,
# to tell the program's own memory growth from flare's; FLARE_SOAK_BARE=1
# runs it a third time under bare CUPTI with the default mode's features and
# no flare (bench/cupti_bare_inject.c, built by build_bare_inject), to tell
# CUPTI's growth from flare's code.
#
# A 10-minute soak does not fit in one device call (10 minutes at most, the
# build included): FLARE_SOAK_DETACH=1 starts it in its own process session
# (setsid: it outlives the call while the machine stays warm) in
# /tmp/flare-soak and returns; scripts/gpu-soak-wait.sh, run in the next
# call (within the machine's 30 s warm period, with no rebuild in between),
# waits for it and copies its log to $OUT. Must never change the build.
soak_seconds=${FLARE_SOAK_SECONDS:-600}
soak_cap=${FLARE_SOAK_CAP:-256M}
soak_beside=()
[ "${FLARE_SOAK_BESIDE:-0}" = 1 ] && soak_beside=(--beside)
if [ "${FLARE_SOAK_BARE:-0}" = 1 ]; then
  build_bare_inject && soak_beside+=(--bare "$build/gpu/libcupti_bare_inject.so") \
    || fail "soak: cc cupti_bare_inject"
fi
echo "== soak: $soak_seconds s of PyTorch training under --max-size $soak_cap"
if [ "${FLARE_SOAK_DETACH:-0}" = 1 ]; then
  rm -rf /tmp/flare-soak && mkdir -p /tmp/flare-soak
  setsid bash -c "python3 -u tests/gpu/soak.py '$flare' /tmp/flare-soak '$soak_seconds' '$soak_cap' \
    > /tmp/flare-soak/soak.txt 2>&1; echo \$? > /tmp/flare-soak/done" </dev/null >/dev/null 2>&1 &
  echo "soak started in the background at $(date -u +%T); scripts/gpu-soak-wait.sh collects it"
else
  python3 tests/gpu/soak.py "$flare" "$work" "$soak_seconds" "$soak_cap" ${soak_beside[@]+"${soak_beside[@]}"} \
    | tee "$OUT/soak.txt" || fail "soak"
  grep -q "OVER" "$OUT/soak.txt" && fail "soak: a target was missed"
fi
