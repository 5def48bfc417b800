#!/usr/bin/env bash
# Installs the Debian packages flare needs to build and test, if any are
# missing. Safe to re-run: it does nothing when everything is present.
set -euo pipefail
# g++: tests/install builds a C++ program against the installed flare (it is
# skipped without one); readelf comes with gcc's binutils. stress-ng: the
# load generator of scripts/test.sh stress. chromium: the headless browser
# that tests/cli/html_browser_check.sh opens `flare report --html` pages in.
# zlib1g-dev: `flare export -o FILE.json.gz` writes gzip through zlib.
# python3-dask, python3-distributed, python3-pandas: `python3 -m flare.fleet`,
# the analysis of many ranks' sessions on a Dask cluster (docs/fleet.md);
# tests/python/test_fleet.py skips it without them.
packages=(cmake make gcc g++ pkg-config libsqlite3-dev libcmocka-dev python3 stress-ng
  chromium zlib1g-dev python3-dask python3-distributed python3-pandas)
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "flare: installing missing packages: ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "flare: need root (or sudo) to install: ${missing[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
