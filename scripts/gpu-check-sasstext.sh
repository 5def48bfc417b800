# gpu-check-sasstext.sh: part "sasstext" of scripts/gpu-check.sh (sourced there;
# uses its $flare, $build, $work, $OUT and fail; it must not exit). The SASS text
# of instructions without a source line (issue 26; src/disasm): builds
# tests/gpu/pc_hot_loop.cu WITHOUT -lineinfo, traces it with one PC window and,
# separately, one SASS metrics window, and checks each session with
# tests/gpu/sass_text_check.py (the capability active, no cubin left, hot_chain's
# instructions all with a text, the hottest one a global load or its consumer). Then the PC session
# again with FLARE_DISASSEMBLER empty (the cubin kept, a warning), disassembled
# afterwards by `flare disasm` with nvdisasm (the other listing format) where the
# machine has it, and checked the same way. Every run is bounded. Output goes to
# $OUT/sass-text.txt; sessions stay in $work. Must never change the build.
# shellcheck shell=bash disable=SC2154
echo "== sasstext: SASS text of instructions without a source line (pc_hot_loop without -lineinfo)"
sasstext_out="$OUT/sass-text.txt"
: > "$sasstext_out"
mkdir -p "$build/gpu"
python3 tests/gpu/sass_text_check.py --self-test 2>&1 | tee -a "$sasstext_out"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "sasstext: self-test of tests/gpu/sass_text_check.py"
echo "disassemblers: cuobjdump $(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump 2>/dev/null || echo none)," \
  "nvdisasm $(command -v nvdisasm || ls /usr/local/cuda/bin/nvdisasm 2>/dev/null || echo none)" | tee -a "$sasstext_out"

# sasstext_trace SESSION ENGINE [VAR=VALUE...]: pc_hot_loop 4 under one window.
sasstext_trace() {
  local session=$1 engine=$2
  shift 2
  rm -rf "$session"
  echo "-- $* flare trace --deep-after 1500ms --deep-for 500ms --deep-engine $engine -- pc_hot_loop 4" |
    tee -a "$sasstext_out"
  ( [ $# -eq 0 ] || export "$@"
    timeout -k 10 120 "$flare" trace -q -o "$session" --deep-after 1500ms --deep-for 500ms \
      --deep-engine "$engine" -- "$build/gpu/pc_hot_loop_nolines" 4 ) >> "$sasstext_out" 2>&1
}

# sasstext_check SESSION ENGINE: the report's hottest instructions, then the check.
sasstext_check() {
  "$flare" report "$1" 2>&1 | grep -E "hot_chain\+|cheap_math\+|sass_text" | head -16 | tee -a "$sasstext_out"
  python3 tests/gpu/sass_text_check.py "$1" "$2" 2>&1 | tee -a "$sasstext_out"
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "sasstext: tests/gpu/sass_text_check.py $1 $2"
}

if nvcc -O2 -arch=sm_90 -I/usr/local/cuda/include -o "$build/gpu/pc_hot_loop_nolines" \
     tests/gpu/pc_hot_loop.cu -ldl; then
  if sasstext_trace "$work/sasstext-pc" pc; then
    sasstext_check "$work/sasstext-pc" pc
  else
    fail "sasstext: flare trace (pc) exited $?"
  fi
  if sasstext_trace "$work/sasstext-sass" sass; then
    sasstext_check "$work/sasstext-sass" sass
  else
    fail "sasstext: flare trace (sass) exited $?"
  fi
  sasstext_nvdisasm=$(command -v nvdisasm || ls /usr/local/cuda/bin/nvdisasm 2>/dev/null)
  if sasstext_trace "$work/sasstext-later" pc FLARE_DISASSEMBLER=; then
    grep -q "not disassembled" "$sasstext_out" || fail "sasstext: no warning without a disassembler"
    echo "-- flare disasm with ${sasstext_nvdisasm:-cuobjdump (no nvdisasm here)}" | tee -a "$sasstext_out"
    if [ -n "$sasstext_nvdisasm" ]; then
      FLARE_DISASSEMBLER=$sasstext_nvdisasm timeout -k 10 120 "$flare" disasm "$work/sasstext-later" 2>&1
    else
      env -u FLARE_DISASSEMBLER timeout -k 10 120 "$flare" disasm "$work/sasstext-later" 2>&1
    fi | tee -a "$sasstext_out"
    [ "${PIPESTATUS[0]}" -eq 0 ] || fail "sasstext: flare disasm"
    sasstext_check "$work/sasstext-later" pc
  else
    fail "sasstext: flare trace (pc, no disassembler) exited $?"
  fi
else
  fail "sasstext: nvcc pc_hot_loop without -lineinfo"
fi
