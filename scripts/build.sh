#!/usr/bin/env bash
# Configures and builds alphast in BUILD_DIR (default _build) from a clean
# checkout; extra arguments go to configure (e.g. --enable-sanitizers).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/_build}
cd "$top"
if ! [ -x configure ] || [ configure.ac -nt configure ]; then
  autoreconf -fi >"${TMPDIR:-/tmp}/alphast-autoreconf.log" 2>&1 || { cat "${TMPDIR:-/tmp}/alphast-autoreconf.log"; exit 1; }
fi
mkdir -p "$build"
cd "$build"
"$top/configure" -q "$@" 2>&1 | grep -v "cannot remove 'core'" || true
make -j"$(nproc)" >/dev/null
echo "alphast: built in $build"
