#!/usr/bin/env bash
# Downloads the Debian packages scripts/gpu-check.sh needs on a GPU machine
# whose image has no SQLite, cmocka or zlib headers (the H200 test machine's does
# not), into .device-deps/, which the device tool carries along
# (carry: [".device-deps"]). Run here, where Debian's archive is reachable.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .device-deps
cd .device-deps
apt-get download libsqlite3-dev libsqlite3-0 libcmocka0 libcmocka-dev zlib1g zlib1g-dev
ls -l
