#!/usr/bin/env bash
# gpu-soak-wait.sh: waits (at most MAX_S seconds, default 560) for the soak
# that `FLARE_SOAK_DETACH=1 scripts/gpu-check.sh soak` started in the
# background, then copies its log to $OUT and says whether it met its
# targets. Run it in the device call after the one that started the soak,
# while the machine is still warm. Exit 0: finished and met; 1: finished
# and missed or failed; 3: still running when MAX_S ran out (call it again).
# Must never build or start anything.
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
max_s=${1:-560}
waited=0
while [ ! -f /tmp/flare-soak/done ] && [ "$waited" -lt "$max_s" ]; do
  sleep 5
  waited=$((waited + 5))
done
[ -f /tmp/flare-soak/soak.txt ] || { echo "no soak found in /tmp/flare-soak"; exit 1; }
cp /tmp/flare-soak/soak.txt "$OUT/soak.txt"
cat /tmp/flare-soak/soak.txt
if [ ! -f /tmp/flare-soak/done ]; then
  echo "soak still running after $waited s of waiting"
  exit 3
fi
[ "$(cat /tmp/flare-soak/done)" = 0 ] && ! grep -q "OVER" /tmp/flare-soak/soak.txt
