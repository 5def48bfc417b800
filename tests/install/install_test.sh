#!/usr/bin/env bash
# install_test.sh: checks `cmake --install` of this build from the outside,
# as a user of the installed tree would see it. Registered with CTest by
# tests/install/CMakeLists.txt, which passes the paths and tools below.
#
#   install_test.sh install    installs into WORK/prefix (and the Runtime
#                              component alone into WORK/runtime); checks the
#                              layout, the SONAME and its links, that nothing
#                              installed names the build tree or the prefix,
#                              and that the installed `flare trace` injects
#                              the installed libflare
#   install_test.sh pkgconfig  builds tests/install/consumer.c with the
#                              installed flare.pc, runs it, reports its session
#   install_test.sh cmake      builds tests/install/consumer/ (C++) with
#                              find_package(flare), runs it, reports its session;
#                              exits 77 (skipped) when there is no C++ compiler
#
# Environment: FLARE_BUILD_DIR, FLARE_WORK_DIR, FLARE_SOURCE_DIR (this
# folder), FLARE_LIBDIR (CMAKE_INSTALL_LIBDIR), FLARE_VERSION, FLARE_CMAKE,
# FLARE_CMAKE_GENERATOR, FLARE_CC, FLARE_PKG_CONFIG; CXX picks the C++
# compiler. Uses no network; everything it writes is under FLARE_WORK_DIR.
set -euo pipefail
mode=${1:?usage: install_test.sh install|pkgconfig|cmake}
build=${FLARE_BUILD_DIR:?} work=${FLARE_WORK_DIR:?} source=${FLARE_SOURCE_DIR:?}
libdir=${FLARE_LIBDIR:?} version=${FLARE_VERSION:?} cmake=${FLARE_CMAKE:?}
prefix=$work/prefix
soname=libflare.so.${version%%.*}

say() { echo "install_test $mode: $*"; }
fail() {
  echo "install_test $mode: FAIL: $*" >&2
  exit 1
}
# Runs a command quietly; on failure shows its output and fails.
quiet() {
  local log=$work/$mode.log
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    fail "$*"
  fi
}
# The values of the TAGs (SONAME, NEEDED, RPATH, RUNPATH) in FILE's dynamic
# section, one a line. (Read whole before matching: `| grep -q` under
# pipefail can fail on the writer's SIGPIPE.)
dynamic_values() {
  local file=$1 section tag
  shift
  section=$(readelf -d "$file") || fail "readelf -d $file"
  for tag in "$@"; do
    sed -n "s/.*($tag) *[^[]*\[\(.*\)\]\$/\1/p" <<<"$section"
  done
}
# Whether the dynamic loader, under the current environment, gives program
# the libflare.so.0 of root (paths compared resolved: $ORIGIN stays as
# bin/../lib in ldd's answer).
loads_libflare_of() {
  local program=$1 root=$2 found
  found=$(ldd "$program" | sed -n "s|^[[:space:]]*$soname => \\([^ ]*\\) .*|\\1|p")
  [ -n "$found" ] && [ "$(realpath "$found")" = "$(realpath "$root/$libdir/$soname")" ]
}
# The session database of DIR exists and `flare report` (installed) shows NAME.
check_session() {
  local dir=$1 name=$2
  [ -f "$dir/session.db" ] || fail "no session database in $dir"
  "$prefix/bin/flare" report "$dir" >"$work/$mode-report.txt" 2>&1 ||
    { cat "$work/$mode-report.txt" >&2; fail "flare report $dir"; }
  grep -q "$name" "$work/$mode-report.txt" ||
    { cat "$work/$mode-report.txt" >&2; fail "the report of $dir does not show '$name'"; }
}
# The installed `flare trace` (root/bin/flare) injects root's libflare and
# records the installed flare-demo, which finds libflare by its RUNPATH.
check_trace() {
  local root=$1 session
  session=$work/$mode-trace-$(basename "$1")
  rm -rf "$session" "$session.injection"
  # shellcheck disable=SC2016 # expanded by the traced shell
  quiet "$root/bin/flare" trace -o "$session" -- \
    sh -c 'printf "%s\n" "$CUDA_INJECTION64_PATH" >"$1" && exec "$2" 2' \
    sh "$session.injection" "$root/bin/flare-demo"
  local expected injected
  expected=$(realpath "$root/$libdir/libflare.so.$version")
  injected=$(cat "$session.injection")
  [ "$injected" = "$expected" ] ||
    fail "$root/bin/flare injects '$injected', not $expected"
  check_session "$session" saxpy
}

# What a user's shell might carry must not steer the checks.
# (DESTDIR would move the install away from --prefix.)
unset DESTDIR FLARE_SESSION_DIR FLARE_OUTPUT_DIR FLARE_LIBRARY FLARE_RUNTIME_PATH \
  CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH
mkdir -p "$work"
command -v readelf >/dev/null 2>&1 || fail "readelf (binutils, which gcc brings) is needed"

case $mode in
install)
  rm -rf "$prefix" "$work/runtime"
  quiet "$cmake" --install "$build" --prefix "$prefix"
  for file in bin/flare bin/flare-demo include/flare/flare.h include/flare/replay.h \
    include/flare/sim.h "$libdir/libflare.so.$version" "$libdir/pkgconfig/flare.pc" \
    "$libdir/cmake/flare/flareConfig.cmake" "$libdir/cmake/flare/flareConfigVersion.cmake" \
    "$libdir/cmake/flare/flareTargets.cmake"; do
    [ -f "$prefix/$file" ] || fail "not installed: $file"
  done
  [ "$(readlink "$prefix/$libdir/libflare.so")" = "$soname" ] ||
    fail "$libdir/libflare.so is not a link to $soname"
  [ "$(readlink "$prefix/$libdir/$soname")" = "libflare.so.$version" ] ||
    fail "$libdir/$soname is not a link to libflare.so.$version"
  [ "$(dynamic_values "$prefix/$libdir/libflare.so.$version" SONAME)" = "$soname" ] ||
    fail "the SONAME of libflare.so.$version is not $soname"
  say "SONAME $soname; links libflare.so -> $soname -> libflare.so.$version"

  # Relocatable, and free of the build tree: no RPATH into it, and the
  # pkg-config and CMake files name neither it nor the prefix.
  for file in "$prefix"/bin/* "$prefix/$libdir/libflare.so.$version"; do
    if grep -qF "$build" <<<"$(dynamic_values "$file" RPATH RUNPATH)"; then
      fail "$file has a run path into the build tree"
    fi
  done
  # shellcheck disable=SC2016 # a literal $ORIGIN
  grep -qF '$ORIGIN' <<<"$(dynamic_values "$prefix/bin/flare-demo" RPATH RUNPATH)" ||
    fail "bin/flare-demo has no \$ORIGIN run path"
  for text in "$prefix/$libdir/pkgconfig" "$prefix/$libdir/cmake"; do
    if grep -rlF -e "$build" -e "$prefix" "$text"; then
      fail "the files above name the build tree or the prefix"
    fi
  done

  loads_libflare_of "$prefix/bin/flare-demo" "$prefix" ||
    fail "bin/flare-demo does not load the installed $soname (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}): $(ldd "$prefix/bin/flare-demo" | grep libflare || true)"
  check_trace "$prefix"
  say "installed flare trace injects the installed libflare"

  # The Runtime component alone: no headers, no libflare.so; flare still
  # finds the library by its SONAME.
  quiet "$cmake" --install "$build" --prefix "$work/runtime" --component Runtime
  if [ -e "$work/runtime/include" ] || [ -e "$work/runtime/$libdir/libflare.so" ]; then
    fail "the Runtime component installs development files"
  fi
  check_trace "$work/runtime"
  say "the Runtime component alone works"
  ;;

pkgconfig)
  [ -d "$prefix" ] || fail "$prefix is missing: the install test runs first"
  # Only the installed tree: PKG_CONFIG_LIBDIR replaces the system's paths.
  export PKG_CONFIG_LIBDIR=$prefix/$libdir/pkgconfig PKG_CONFIG_PATH=
  pkg_config=${FLARE_PKG_CONFIG:?}
  found=$("$pkg_config" --modversion flare) || fail "pkg-config does not find flare"
  [ "$found" = "$version" ] || fail "pkg-config says flare $found, not $version"
  read -r -a flags <<<"$("$pkg_config" --cflags --libs flare)"
  say "pkg-config --cflags --libs flare: ${flags[*]}"
  quiet "${FLARE_CC:?}" -std=c11 -Wall -Wextra -Werror -o "$work/consumer_c" \
    "$source/consumer.c" "${flags[@]}"
  grep -qxF "$soname" <<<"$(dynamic_values "$work/consumer_c" NEEDED)" ||
    fail "consumer_c does not need $soname"
  export LD_LIBRARY_PATH=$prefix/$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  loads_libflare_of "$work/consumer_c" "$prefix" ||
    fail "consumer_c does not load the installed $soname"
  rm -rf "$work/session-c"
  quiet "$work/consumer_c" "$work/session-c"
  check_session "$work/session-c" install_check_c
  say "a C program built with pkg-config recorded a session"
  ;;

cmake)
  [ -d "$prefix" ] || fail "$prefix is missing: the install test runs first"
  cxx='' candidates=(c++ g++ clang++)
  [ -n "${CXX:-}" ] && candidates=("$CXX")
  for candidate in "${candidates[@]}"; do
    if command -v "$candidate" >/dev/null 2>&1; then
      cxx=$(command -v "$candidate")
      break
    fi
  done
  if [ -z "$cxx" ]; then
    say "SKIPPED: no C++ compiler (${CXX:-c++, g++ or clang++}); scripts/install-deps.sh installs g++"
    exit 77
  fi
  consumer=$work/cmake-consumer
  rm -rf "$consumer"
  generator=()
  [ -n "${FLARE_CMAKE_GENERATOR:-}" ] && generator=(-G "$FLARE_CMAKE_GENERATOR")
  quiet "$cmake" -S "$source/consumer" -B "$consumer" "${generator[@]}" \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  grep -qx "flare_DIR:PATH=$prefix/$libdir/cmake/flare" "$consumer/CMakeCache.txt" ||
    fail "find_package(flare) found $(grep '^flare_DIR' "$consumer/CMakeCache.txt"), not the prefix's"
  quiet "$cmake" --build "$consumer"
  grep -qxF "$soname" <<<"$(dynamic_values "$consumer/consumer_cxx" NEEDED)" ||
    fail "consumer_cxx does not need $soname"
  export LD_LIBRARY_PATH=$prefix/$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  rm -rf "$work/out-cxx"
  session=$(FLARE_OUTPUT_DIR=$work/out-cxx "$consumer/consumer_cxx") ||
    fail "consumer_cxx failed"
  case $session in
  "$work/out-cxx"/*) ;;
  *) fail "consumer_cxx recorded into '$session', not under FLARE_OUTPUT_DIR=$work/out-cxx" ;;
  esac
  check_session "$session" install_check_cxx
  say "a C++ program built with find_package(flare) recorded a session ($cxx)"
  ;;

*)
  fail "unknown mode (install, pkgconfig or cmake)"
  ;;
esac
